//! Plain-text tables for terminal output: left-aligned columns separated by two spaces. The
//! report ([`crate::render`]) and `karpenter plan` print with them.

/// A table under construction.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty, extra cells are kept.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders the table, one line per row, no trailing spaces.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                line.push_str(cell);
                if i + 1 < columns {
                    line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns_and_trims() {
        let mut t = Table::new(&["A", "LONG HEADER", "C"]);
        t.row(vec!["xxxx".into(), "y".into(), "".into()]);
        t.row(vec!["z".into()]);
        assert_eq!(t.render(), "A     LONG HEADER  C\nxxxx  y\nz\n");
        assert!(!t.is_empty());
    }
}
