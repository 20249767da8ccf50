//! A line diff with bounded work: Myers' O(ND) algorithm, which costs in
//! proportion to the lines that differ rather than the product of the two
//! files' lengths, and gives up (saying so) past a number of differing
//! lines or a deadline. A config version's files are a tenant's input: two
//! 45,000-line files must not make the dashboard build a 2-billion-cell
//! table.

use std::collections::HashMap;
use std::time::Instant;

/// One line of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// Why a diff was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GaveUp {
    /// More than this many lines differ.
    TooManyChanges(usize),
    /// The deadline passed first.
    Deadline,
}

/// The lines of `a` and `b` as a shortest edit script, or why not: more
/// than `max_changes` lines removed and added, or `deadline` passed.
pub(super) fn line_diff<'a>(
    a: &'a str,
    b: &'a str,
    max_changes: usize,
    deadline: Instant,
) -> Result<Vec<Line<'a>>, GaveUp> {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    // The common head and tail cost nothing.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (mid_a, mid_b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    // Lines as numbers, so a comparison is one instruction.
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut id = |l: &'a str| {
        let n = ids.len() as u32;
        *ids.entry(l).or_insert(n)
    };
    let xa: Vec<u32> = mid_a.iter().map(|l| id(l)).collect();
    let xb: Vec<u32> = mid_b.iter().map(|l| id(l)).collect();
    let script = myers(&xa, &xb, max_changes, deadline)?;
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 8);
    out.extend(a[..head].iter().map(|l| Line::Same(l)));
    let (mut i, mut j) = (0, 0);
    for op in script {
        match op {
            Op::Same => {
                out.push(Line::Same(mid_a[i]));
                i += 1;
                j += 1;
            }
            Op::Del => {
                out.push(Line::Removed(mid_a[i]));
                i += 1;
            }
            Op::Ins => {
                out.push(Line::Added(mid_b[j]));
                j += 1;
            }
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| Line::Same(l)));
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Del,
    Ins,
}

/// Myers' greedy algorithm ("An O(ND) Difference Algorithm and Its
/// Variations", 1986), keeping for each round d only the diagonals it can
/// reach (2d + 1), so memory is O(D²) and time O((N + M) D) for D at most
/// `max_d`.
fn myers(a: &[u32], b: &[u32], max_d: usize, deadline: Instant) -> Result<Vec<Op>, GaveUp> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let limit = max_d.min(a.len() + b.len()) as isize;
    let off = limit + 1;
    let mut v = vec![0isize; 2 * limit as usize + 3];
    // trace[d]: the furthest x on diagonals -d..=d before round d.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    for d in 0..=limit {
        if d % 16 == 0 && Instant::now() > deadline {
            return Err(GaveUp::Deadline);
        }
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let i = (off + k) as usize;
            let mut x = if k == -d || (k != d && v[i - 1] < v[i + 1]) {
                v[i + 1]
            } else {
                v[i - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[i] = x;
            if x >= n && y >= m {
                return Ok(backtrack(&trace, n, m));
            }
            k += 2;
        }
    }
    Err(GaveUp::TooManyChanges(max_d))
}

/// The edit script, from the end back to the start through the rounds.
fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<Op> {
    let mut ops = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len() as isize).rev() {
        // The diagonals before round d, as -d..=d.
        let at = |k: isize| trace[d as usize][(k + d) as usize];
        let k = x - y;
        let (px, py) = if d == 0 {
            (0, 0)
        } else {
            let pk = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
                k + 1
            } else {
                k - 1
            };
            let px = at(pk);
            (px, px - pk)
        };
        // The snake: equal lines back to where this round's edit ended.
        while x > px && y > py {
            ops.push(Op::Same);
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == px {
                ops.push(Op::Ins);
                y -= 1;
            } else {
                ops.push(Op::Del);
                x -= 1;
            }
        }
    }
    ops.reverse();
    ops
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn diff(a: &str, b: &str) -> Vec<Line<'static>> {
        let (a, b): (&'static str, &'static str) = (Box::leak(a.into()), Box::leak(b.into()));
        line_diff(a, b, 1000, Instant::now() + Duration::from_secs(10)).unwrap()
    }

    /// Applying a diff to its first text gives the second, and it keeps
    /// the most lines a diff can keep (the longest common subsequence).
    fn check(a: &str, b: &str) {
        let d = diff(a, b);
        let old: Vec<&str> = d
            .iter()
            .filter_map(|l| match l {
                Line::Same(t) | Line::Removed(t) => Some(*t),
                Line::Added(_) => None,
            })
            .collect();
        let new: Vec<&str> = d
            .iter()
            .filter_map(|l| match l {
                Line::Same(t) | Line::Added(t) => Some(*t),
                Line::Removed(_) => None,
            })
            .collect();
        assert_eq!(old, a.lines().collect::<Vec<_>>(), "{a:?} -> {b:?}");
        assert_eq!(new, b.lines().collect::<Vec<_>>(), "{a:?} -> {b:?}");
        let kept = d.iter().filter(|l| matches!(l, Line::Same(_))).count();
        assert_eq!(kept, lcs(a, b), "{a:?} -> {b:?}: {d:?}");
    }

    fn lcs(a: &str, b: &str) -> usize {
        let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
        let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                t[i][j] = if a[i] == b[j] {
                    t[i + 1][j + 1] + 1
                } else {
                    t[i + 1][j].max(t[i][j + 1])
                };
            }
        }
        t[0][0]
    }

    #[test]
    fn a_line_diff_keeps_the_common_lines_in_order() {
        assert_eq!(
            diff("a\nb\nc\n", "a\nc\nd\n"),
            vec![
                Line::Same("a"),
                Line::Removed("b"),
                Line::Same("c"),
                Line::Added("d")
            ]
        );
        assert_eq!(diff("", "x"), vec![Line::Added("x")]);
        assert_eq!(diff("x", ""), vec![Line::Removed("x")]);
        assert_eq!(diff("", ""), vec![]);
        for (a, b) in [
            ("a\nb\nc\nd\ne", "x\nb\ny\nd\nz\ne"),
            ("a\nb\na\nb\na", "b\na\nb\na\nb"),
            ("1\n2\n3\n4\n5\n6", "6\n5\n4\n3\n2\n1"),
            ("a\na\na\nb", "b\na\na\na"),
            ("k = 1\n[x]\ny = 2\n", "k = 2\n[x]\ny = 2\nz = 3\n"),
        ] {
            check(a, b);
            check(b, a);
        }
        // Every pair of short texts over a two-letter alphabet.
        let texts: Vec<String> = (0..64u32)
            .flat_map(|bits| {
                (1..=6).map(move |len| {
                    (0..len)
                        .map(|i| if bits >> i & 1 == 1 { "a" } else { "b" })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            })
            .collect();
        for a in texts.iter().step_by(7) {
            for b in texts.iter().step_by(5) {
                check(a, b);
            }
        }
    }

    /// Two big files that differ everywhere: the diff gives up at its cap
    /// rather than building a table of every pair of lines.
    #[test]
    fn a_diff_of_big_files_that_differ_everywhere_gives_up() {
        let a: String = (0..45_000).map(|i| format!("a{i}\n")).collect();
        let b: String = (0..45_000).map(|i| format!("b{i}\n")).collect();
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(
            line_diff(&a, &b, 1000, far),
            Err(GaveUp::TooManyChanges(1000))
        );
        // A deadline already passed stops it at once.
        assert_eq!(
            line_diff(&a, &b, 1_000_000, Instant::now()),
            Err(GaveUp::Deadline)
        );
        // A big file with a few changes is diffed in full.
        let c = a
            .replacen("a100\n", "changed\n", 1)
            .replacen("a40000\n", "", 1);
        let d = line_diff(&a, &c, 1000, far).unwrap();
        let changed: Vec<&Line<'_>> = d.iter().filter(|l| !matches!(l, Line::Same(_))).collect();
        assert_eq!(
            changed,
            [
                &Line::Removed("a100"),
                &Line::Added("changed"),
                &Line::Removed("a40000")
            ]
        );
    }
}
