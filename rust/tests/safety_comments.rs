//! Every `unsafe` block, `unsafe impl` and `unsafe fn` of the crate (its
//! sources, tests and examples) says why it holds: a `SAFETY:` comment on
//! the statement or just above it, or a `# Safety` section for a function
//! whose callers must keep a contract.

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().map_or(false, |e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether line `i` (an unsafe block or impl) has its reason: a SAFETY
/// comment on it, or above it within the same statement (comment lines,
/// or lines of a statement not yet ended).
fn justified(lines: &[&str], i: usize) -> bool {
    if lines[i].contains("SAFETY:") {
        return true;
    }
    let mut j = i;
    while j > 0 && i - j < 16 {
        j -= 1;
        let t = lines[j].trim();
        if t.contains("SAFETY:") {
            return true;
        }
        let comment = t.starts_with("//");
        let open = !(t.ends_with(';') || t.ends_with('{') || t.ends_with('}') || t.is_empty());
        if !comment && !open && !t.starts_with('#') {
            return false;
        }
    }
    false
}

/// Whether the `unsafe fn` on line `i` documents its contract.
fn documented(lines: &[&str], i: usize) -> bool {
    lines[..i].iter().rev().take_while(|l| l.trim().starts_with("///") || l.trim().starts_with("#[")).any(|l| l.contains("# Safety"))
}

#[test]
fn every_unsafe_says_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // The code, without comments and string literals.
            let code: String = line.split("//").next().unwrap().split('"').step_by(2).collect();
            // `unsafe fn name` or `unsafe extern "C" fn name`, not a type
            // such as `unsafe extern "C" fn(...)`.
            let defines_fn = code.split("unsafe ").skip(1).any(|rest| {
                let rest = rest.trim_start_matches("extern ").trim_start();
                rest.strip_prefix("fn ").map_or(false, |name| name.starts_with(|c: char| c.is_alphabetic()))
            });
            let ok = if defines_fn {
                documented(&lines, i)
            } else if code.contains("unsafe {") || code.contains("unsafe impl") {
                justified(&lines, i)
            } else {
                true
            };
            if !ok {
                missing.push(format!("{}:{}: {}", file.strip_prefix(root).unwrap().display(), i + 1, line.trim()));
            }
        }
    }
    assert!(missing.is_empty(), "unsafe without its reason:\n  {}", missing.join("\n  "));
}
