//! CEL expressions in `spec.kubelet` (`AWS_FEATURE_GATES` `NodeClassCEL`, Karpenter v1.15):
//! `maxPods` as a string, and `kubeReserved`/`systemReserved` values that are not
//! quantities, are evaluated for each instance type, over upstream's variables:
//!
//! | variable | type | value |
//! |---|---|---|
//! | `vcpus` | int | default vCPUs |
//! | `memory_mib` | int | memory in MiB |
//! | `default_enis` | int | network interfaces of the default card |
//! | `ips_per_eni` | int | IPv4 addresses per interface |
//! | `max_pods` | int | for `maxPods`, the pod count without it (ENI-limited, podsPerCore); for reservations, the resolved `maxPods` |
//! | `instance_type` | string | the type's name |
//!
//! with `max` and `min` over two ints or doubles (an int and a double give a double), and
//! CEL's standard library. The result must be an int or a double (a double is truncated; a
//! non-finite one is an error). Reservations are written in their field's usual unit:
//! `cpu` in millicores rounded up to 10m, `memory` in MiB rounded up to 16Mi,
//! `ephemeral-storage` in GiB, `pid` as a count.
//!
//! Evaluation uses the `cel` crate; upstream type-checks an expression when it compiles
//! it, which the crate does not, so [`compile`] also evaluates the expression once for a
//! sample instance type and refuses a type error there (an int multiplied by a double, a
//! string result) as upstream's compiler would.

use cel::objects::Value as CelValue;
use cel::{Context, Env, ExecutionError, Program};
use std::sync::Arc;

/// Cpu results are rounded up to this many millicores.
const CPU_ROUNDING_MILLI: i64 = 10;
/// Memory results are rounded up to this many MiB.
const MEMORY_ROUNDING_MIB: i64 = 16;

/// The variables an expression sees for one instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceTypeVars {
    /// `vcpus`.
    pub vcpus: i64,
    /// `memory_mib`.
    pub memory_mib: i64,
    /// `default_enis`.
    pub default_enis: i64,
    /// `ips_per_eni`.
    pub ips_per_eni: i64,
    /// `max_pods`.
    pub max_pods: i64,
    /// `instance_type`.
    pub instance_type: String,
}

/// The variable names, as declared.
pub const VARIABLES: [&str; 6] = [
    "vcpus",
    "memory_mib",
    "default_enis",
    "ips_per_eni",
    "max_pods",
    "instance_type",
];

/// A compiled expression.
#[derive(Clone)]
pub struct Expression {
    source: String,
    program: Arc<Program>,
    env: Arc<Env>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expression").field(&self.source).finish()
    }
}

/// The sample the type check evaluates against (an m5.large).
fn sample() -> InstanceTypeVars {
    InstanceTypeVars {
        vcpus: 2,
        memory_mib: 8192,
        default_enis: 3,
        ips_per_eni: 10,
        max_pods: 29,
        instance_type: "m5.large".into(),
    }
}

/// Parses and checks `source`: its variables must be declared, and its result an int or a
/// double.
///
/// # Errors
/// Why it does not compile, as text naming the expression.
pub fn compile(source: &str) -> Result<Expression, String> {
    let env = Arc::new(Env::stdlib());
    let program = env
        .compile(source)
        .map_err(|e| format!("compiling expression {source:?}: {e}"))?;
    let references = program.references();
    let mut unknown: Vec<&str> = references
        .variables()
        .into_iter()
        .filter(|v| !VARIABLES.contains(v))
        .collect();
    unknown.sort_unstable();
    if let Some(name) = unknown.first() {
        return Err(format!(
            "compiling expression {source:?}: undeclared reference to {name:?} (variables are {})",
            VARIABLES.join(", ")
        ));
    }
    let expression = Expression {
        source: source.to_owned(),
        program: Arc::new(program),
        env,
    };
    match expression.run(&sample()) {
        Ok(CelValue::Int(_) | CelValue::UInt(_) | CelValue::Float(_)) => Ok(expression),
        Ok(other) => Err(format!(
            "compiling expression {source:?}: expression must return int or double, not {}",
            type_name(&other)
        )),
        Err(ExecutionError::DivisionByZero(_) | ExecutionError::RemainderByZero(_)) => {
            Ok(expression)
        }
        Err(e) => Err(format!("compiling expression {source:?}: {e}")),
    }
}

fn type_name(v: &CelValue) -> &'static str {
    match v {
        CelValue::String(_) => "string",
        CelValue::Bool(_) => "bool",
        CelValue::List(_) => "list",
        CelValue::Map(_) => "map",
        CelValue::Null => "null",
        _ => "another type",
    }
}

/// Upstream's `max`/`min`: two ints give an int, any double a double.
fn pick(
    name: &'static str,
    a: CelValue,
    b: CelValue,
    larger: bool,
) -> Result<CelValue, ExecutionError> {
    let as_f64 = |v: &CelValue| match v {
        CelValue::Int(i) => Some(*i as f64),
        CelValue::Float(f) => Some(*f),
        _ => None,
    };
    match (&a, &b) {
        (CelValue::Int(x), CelValue::Int(y)) => {
            Ok(CelValue::Int(if larger { *x.max(y) } else { *x.min(y) }))
        }
        _ => match (as_f64(&a), as_f64(&b)) {
            (Some(x), Some(y)) => Ok(CelValue::Float(if (x > y) == larger { x } else { y })),
            _ => Err(ExecutionError::function_error(
                name,
                "no matching overload (expects two ints or doubles)",
            )),
        },
    }
}

impl Expression {
    /// The text it was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn run(&self, vars: &InstanceTypeVars) -> Result<CelValue, ExecutionError> {
        let mut ctx = Context::with_env(self.env.clone());
        ctx.add_variable_from_value("vcpus", vars.vcpus);
        ctx.add_variable_from_value("memory_mib", vars.memory_mib);
        ctx.add_variable_from_value("default_enis", vars.default_enis);
        ctx.add_variable_from_value("ips_per_eni", vars.ips_per_eni);
        ctx.add_variable_from_value("max_pods", vars.max_pods);
        ctx.add_variable_from_value("instance_type", vars.instance_type.clone());
        // Neither is in the standard library, so the names are free.
        let _ = ctx.add_function("max", |a: CelValue, b: CelValue| pick("max", a, b, true));
        let _ = ctx.add_function("min", |a: CelValue, b: CelValue| pick("min", a, b, false));
        self.program.execute(&ctx)
    }

    /// The expression's value for one instance type, as an integer (a double is truncated).
    ///
    /// # Errors
    /// An evaluation error, a non-finite double, or a result that is not a number, naming
    /// the expression and the instance type.
    pub fn evaluate(&self, vars: &InstanceTypeVars) -> Result<i64, String> {
        let at = || format!("expression {:?} for {}", self.source, vars.instance_type);
        match self.run(vars) {
            Ok(CelValue::Int(i)) => Ok(i),
            Ok(CelValue::UInt(u)) => {
                i64::try_from(u).map_err(|_| format!("{}: {u} is too large", at()))
            }
            Ok(CelValue::Float(f)) if f.is_finite() => Ok(f as i64),
            Ok(CelValue::Float(f)) => Err(format!("{}: returned a non-finite value {f}", at())),
            Ok(other) => Err(format!(
                "{}: returned a {}, not a number",
                at(),
                type_name(&other)
            )),
            Err(e) => Err(format!("evaluating {}: {e}", at())),
        }
    }
}

/// An expression's result for reservation `key`, as the quantity upstream writes (see the
/// module docs for units and rounding).
pub fn format_reservation(key: &str, result: i64) -> String {
    let round = |value: i64, to: i64| {
        if value <= 0 || value % to == 0 || value > i64::MAX - to {
            value
        } else {
            (value / to + 1) * to
        }
    };
    match key {
        "cpu" => format!("{}m", round(result, CPU_ROUNDING_MILLI)),
        "memory" => format!("{}Mi", round(result, MEMORY_ROUNDING_MIB)),
        "ephemeral-storage" => format!("{result}Gi"),
        _ => result.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(vcpus: i64, memory_mib: i64, max_pods: i64) -> InstanceTypeVars {
        InstanceTypeVars {
            vcpus,
            memory_mib,
            default_enis: 4,
            ips_per_eni: 15,
            max_pods,
            instance_type: "c5.xlarge".into(),
        }
    }

    fn eval(source: &str, v: &InstanceTypeVars) -> Result<i64, String> {
        compile(source)?.evaluate(v)
    }

    #[test]
    fn upstreams_variables_and_functions() {
        let v = vars(4, 8192, 58);
        assert_eq!(eval("vcpus * 30", &v), Ok(120));
        assert_eq!(eval("memory_mib / 100", &v), Ok(81));
        assert_eq!(eval("default_enis * (ips_per_eni - 1) + 2", &v), Ok(58));
        assert_eq!(eval("max_pods", &v), Ok(58));
        assert_eq!(eval("min(110, vcpus * 8)", &v), Ok(32));
        assert_eq!(eval("max(60, vcpus * 10)", &v), Ok(60));
        assert_eq!(eval("max(1, 2.5)", &v), Ok(2), "double truncated");
        assert_eq!(eval("min(vcpus, 1.5) * 2.0", &v), Ok(3));
        assert_eq!(
            eval("instance_type.startsWith('c5') ? 110 : 58", &v),
            Ok(110)
        );
        assert_eq!(eval("double(memory_mib) * 0.01", &v), Ok(81));
    }

    #[test]
    fn type_errors_are_compile_errors() {
        for (source, why) in [
            ("vcpus * 1.5", "mul"),
            ("instance_type", "must return int or double"),
            ("vcpus > 2", "must return int or double"),
            ("cores * 2", "undeclared reference to \"cores\""),
            ("vcpus *", "compiling expression"),
            ("max(instance_type, 2)", "no matching overload"),
        ] {
            let e = compile(source).unwrap_err();
            assert!(e.contains(why), "{source}: {e}");
        }
        // A division by zero depends on the instance type: it compiles and fails where it
        // happens.
        let e = compile("10 / (vcpus - 2)")
            .unwrap()
            .evaluate(&sample())
            .unwrap_err();
        assert!(e.contains("m5.large"), "{e}");
        let e = eval("1.0 / 0.0", &vars(1, 1, 1)).unwrap_err();
        assert!(e.contains("non-finite"), "{e}");
    }

    #[test]
    fn reservations_are_written_in_their_units_and_rounded_up() {
        assert_eq!(format_reservation("cpu", 121), "130m");
        assert_eq!(format_reservation("cpu", 120), "120m");
        assert_eq!(format_reservation("memory", 630), "640Mi");
        assert_eq!(format_reservation("memory", 0), "0Mi");
        assert_eq!(format_reservation("ephemeral-storage", 3), "3Gi");
        assert_eq!(format_reservation("pid", 1001), "1001");
    }
}
