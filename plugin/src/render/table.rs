//! Tables as `kubectl get` prints them: upper-case headers, columns
//! aligned and three spaces apart, no borders, no trailing blanks.

/// The space between two columns.
const GAP: usize = 3;

/// `headers` over `rows`, each row as many cells as there are headers.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let width = |cell: &str| cell.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(column) {
                *w = (*w).max(width(cell));
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        let last = cells.len().saturating_sub(1);
        for (column, cell) in cells.into_iter().enumerate() {
            text.push_str(cell);
            if column < last {
                let pad = widths[column] - width(cell) + GAP;
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_three_spaces_apart_with_no_trailing_blanks() {
        let rows = vec![
            vec!["train".to_string(), "worker-1".into(), "running".into()],
            vec!["a-much-longer-name".to_string(), "-".into(), "".into()],
        ];
        let text = render(&["NAME", "CLUSTER", "MIRROR"], &rows);
        assert_eq!(
            text,
            "NAME                 CLUSTER    MIRROR\n\
             train                worker-1   running\n\
             a-much-longer-name   -\n"
        );
    }

    #[test]
    fn width_counts_characters_not_bytes() {
        let rows = vec![vec!["ü".to_string(), "x".into()]];
        assert_eq!(render(&["N", "X"], &rows), "N   X\nü   x\n");
    }
}
