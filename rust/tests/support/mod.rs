//! What the multi-process tests and the bench example share: a temporary
//! directory, the C peer (compiled here against the crate's headers and
//! library), children with a bounded line reader, and shared words.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("vigil-rs-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dirs(var: &str) -> Vec<String> {
    var.split(':').filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// The directories build.rs found libvigil and its headers in.
pub fn lib_dirs() -> Vec<String> {
    dirs(env!("VIGIL_BUILD_LIB_DIRS"))
}

pub fn include_dirs() -> Vec<String> {
    dirs(env!("VIGIL_BUILD_INCLUDE_DIRS"))
}

/// Compiles tests/c/peer.c into `dir` (optimised, as the library is) and
/// returns the program's path.
pub fn c_peer(dir: &Path) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/peer.c");
    let exe = dir.join("vigil_rust_peer");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]);
    for inc in include_dirs() {
        cmd.arg(format!("-I{inc}"));
    }
    cmd.arg(&src).arg("-o").arg(&exe);
    for lib in lib_dirs() {
        cmd.arg(format!("-L{lib}")).arg(format!("-Wl,-rpath,{lib}"));
    }
    cmd.arg("-lvigil").arg("-pthread");
    let out = cmd.output().map_err(|e| format!("{cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cc} peer.c:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(exe)
}

/// A child process whose stdout is read line by line on a thread, so
/// every read can be bounded; its stdin is a pipe it may wait on.
pub struct Proc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command) -> Result<Proc, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {name}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Proc { child, stdin, lines, name: name.to_string() })
    }

    /// The next line, or an error naming the child after `timeout`.
    pub fn line(&self, timeout: Duration) -> Result<String, String> {
        self.lines
            .recv_timeout(timeout)
            .map_err(|_| format!("{}: no line within {:?}", self.name, timeout))
    }

    /// Every line until the child closes its stdout (bounded).
    pub fn rest(&self, timeout: Duration) -> Vec<String> {
        let end = Instant::now() + timeout;
        let mut all = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
            all.push(l);
        }
        all
    }

    /// Closes the child's stdin: its cue to leave.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn write_line(&mut self, text: &str) -> Result<(), String> {
        use std::io::Write;
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{text}").map_err(|e| format!("{}: {e}", self.name))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// The exit status within `timeout`, or an error (the child is then killed).
    pub fn wait(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let end = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return Ok(st),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    self.kill();
                    let _ = self.child.wait();
                    return Err(format!("{} did not exit within {:?}", self.name, timeout));
                }
                Err(e) => return Err(format!("{}: {e}", self.name)),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
        let _ = self.child.wait();
    }
}

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
}

/// `n` 64-bit words in a file mapped shared, for processes to tell each
/// other what they have reached.
pub struct Words {
    base: *mut AtomicU64,
    n: usize,
}

impl Words {
    pub fn create(path: &Path, n: usize) -> Words {
        let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path).expect("words file");
        f.set_len((n * 8) as u64).expect("words size");
        Self::map(&f, n)
    }

    pub fn open(path: &Path, n: usize) -> Words {
        let f = std::fs::OpenOptions::new().read(true).write(true).open(path).expect("words file");
        Self::map(&f, n)
    }

    fn map(f: &std::fs::File, n: usize) -> Words {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a shared read-write mapping of a file of n words; the
        // words are only ever touched as atomics.
        let p = unsafe { mmap(std::ptr::null_mut(), n * 8, 3, 1, f.as_raw_fd(), 0) };
        assert!(p as isize != -1, "mmap failed");
        Words { base: p as *mut AtomicU64, n }
    }

    pub fn get(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.n);
        // SAFETY: in range of the mapping, which lives as long as self.
        unsafe { &*self.base.add(i) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        // SAFETY: the mapping made in map, no longer borrowed.
        unsafe { munmap(self.base as *mut c_void, self.n * 8) };
    }
}

/// A python3 that can import cffi (the Python package's one dependency),
/// Debian's first.
pub fn python() -> Option<String> {
    let candidates = [std::env::var("VIGIL_PYTHON").unwrap_or_default(), "/usr/bin/python3".into(), "python3".into()];
    candidates.into_iter().filter(|p| !p.is_empty()).find(|p| {
        Command::new(p)
            .args(["-c", "import cffi"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
}

/// The shared libvigil for the Python package (VIGIL_LIBRARY).
pub fn vigil_library() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VIGIL_LIBRARY") {
        return Some(PathBuf::from(p));
    }
    lib_dirs().into_iter().map(|d| Path::new(&d).join("libvigil.so")).find(|p| p.exists())
}

/// The repository's Python package directory.
pub fn python_dir() -> PathBuf {
    std::env::var_os("VIGIL_PYTHONPATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../python"))
}
