// Values under the pointer: a cursor line and a box with each series' value at that time.
// The charts are complete without it; it only reads the page's own data.
(function () {
  "use strict";
  var source = document.getElementById("report-data");
  if (!source) {
    return;
  }
  var data = JSON.parse(source.textContent);
  var times = data.t;

  function two(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // The same labels as the time axis.
  function label(seconds) {
    var s = Math.round(seconds);
    var h = Math.floor(s / 3600);
    var m = Math.floor(s / 60) % 60;
    var rest = s % 60;
    var text;
    if (data.style === "d") {
      text = Math.floor(h / 24) + "d " + two(h % 24) + ":" + two(m);
    } else {
      text = two(h) + ":" + two(m);
    }
    if (data.style === "hms" || rest !== 0) {
      text += ":" + two(rest);
    }
    return text;
  }

  // The sample whose value holds at `t`: the last one at or before it for states, the first
  // one at or after it for what happened over the interval before a sample.
  function sampleAt(t, step) {
    var lo = 0;
    var hi = times.length - 1;
    var mid;
    if (step === "after") {
      while (lo < hi) {
        mid = (lo + hi + 1) >> 1;
        if (times[mid] <= t) { lo = mid; } else { hi = mid - 1; }
      }
    } else {
      while (lo < hi) {
        mid = (lo + hi) >> 1;
        if (times[mid] >= t) { hi = mid; } else { lo = mid + 1; }
      }
    }
    return lo;
  }

  function format(value, unit) {
    return unit === "$" ? "$" + value.toFixed(4) + "/h" : String(value);
  }

  function wire(figure) {
    var chart = data.charts[figure.getAttribute("data-chart")];
    var svg = figure.querySelector("svg[data-span]");
    var cursor = svg && svg.querySelector(".cursor");
    var tip = figure.querySelector(".tip");
    if (!chart || !cursor || !tip) {
      return;
    }
    var x0 = Number(svg.getAttribute("data-x0"));
    var x1 = Number(svg.getAttribute("data-x1"));
    var span = Number(svg.getAttribute("data-span"));

    function hide() {
      cursor.style.display = "none";
      tip.style.display = "none";
    }

    svg.addEventListener("mousemove", function (event) {
      var box = svg.getBoundingClientRect();
      var x = (event.clientX - box.left) * svg.viewBox.baseVal.width / box.width;
      if (x < x0 || x > x1 || span <= 0) {
        hide();
        return;
      }
      var k = sampleAt((x - x0) / (x1 - x0) * span, chart.step);
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.style.display = "inline";
      while (tip.firstChild) {
        tip.removeChild(tip.firstChild);
      }
      var head = document.createElement("div");
      head.className = "tip-time";
      head.textContent = chart.step === "after" || k === 0
        ? "at " + label(times[k])
        : label(times[k - 1]) + "–" + label(times[k]);
      tip.appendChild(head);
      var few = chart.series.length <= 2;
      chart.series.forEach(function (series) {
        var value = series.v[k] || 0;
        if (!few && value === 0) {
          return;
        }
        var row = document.createElement("div");
        var dot = document.createElement("span");
        dot.className = "dot";
        dot.style.background = series.color;
        row.appendChild(dot);
        row.appendChild(document.createTextNode(series.name + ": " + format(value, chart.unit)));
        tip.appendChild(row);
      });
      var frame = figure.getBoundingClientRect();
      tip.style.display = "block";
      var left = event.clientX - frame.left + 14;
      if (left + tip.offsetWidth > frame.width) {
        left = event.clientX - frame.left - tip.offsetWidth - 14;
      }
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = (event.clientY - frame.top + 12) + "px";
    });
    svg.addEventListener("mouseleave", hide);
    figure.setAttribute("data-hover", "on");
  }

  Array.prototype.forEach.call(document.querySelectorAll("figure.chart"), wire);
}());
