//! Finds libvigil (and libvigil-etcd with the `etcd` feature) for the
//! linker: `VIGIL_LIB_DIR` (with `VIGIL_INCLUDE_DIR`, default
//! `$VIGIL_LIB_DIR/../include`) when set, else the `pkg-config` program
//! (`PKG_CONFIG` names another), else the linker's default paths.
//! No crate is used: the program is run as any user would run it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Found {
    lib_dirs: Vec<PathBuf>,
    include_dirs: Vec<PathBuf>,
}

fn pkg_config(module: &str) -> Option<Found> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&prog)
        .args(["--libs-only-L", "--cflags-only-I", module])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut found = Found { lib_dirs: Vec::new(), include_dirs: Vec::new() };
    for word in text.split_whitespace() {
        if let Some(dir) = word.strip_prefix("-L") {
            found.lib_dirs.push(PathBuf::from(dir));
        } else if let Some(dir) = word.strip_prefix("-I") {
            found.include_dirs.push(PathBuf::from(dir));
        }
    }
    Some(found)
}

/// A directory the dynamic loader searches anyway needs no run path.
fn is_system_dir(dir: &Path) -> bool {
    ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
        .iter()
        .any(|sys| dir == Path::new(sys) || dir.parent() == Some(Path::new(sys)))
}

fn main() {
    for var in ["VIGIL_LIB_DIR", "VIGIL_INCLUDE_DIR", "PKG_CONFIG", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let etcd = env::var_os("CARGO_FEATURE_ETCD").is_some();

    let found = if let Some(dir) = env::var_os("VIGIL_LIB_DIR") {
        let lib = PathBuf::from(dir);
        let include = env::var_os("VIGIL_INCLUDE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| lib.join("../include"));
        Found { lib_dirs: vec![lib], include_dirs: vec![include] }
    } else {
        let module = if etcd { "vigil-etcd" } else { "vigil" };
        match pkg_config(module) {
            Some(found) => found,
            None => {
                println!(
                    "cargo:warning=neither VIGIL_LIB_DIR nor `pkg-config {module}` found libvigil; \
                     linking with the linker's default paths"
                );
                Found { lib_dirs: Vec::new(), include_dirs: Vec::new() }
            }
        }
    };

    for dir in &found.lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        // This package's own tests, examples and benchmarks find the
        // library where it was linked (dependents choose for themselves).
        if !is_system_dir(dir) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
    // Dynamic, always: libvigil-etcd is linked with the shared libvigil,
    // and the program must hold one copy of the core (the keepalive learns
    // from the adapter through the core's state).
    println!("cargo:rustc-link-lib=dylib=vigil");
    if etcd {
        println!("cargo:rustc-link-lib=dylib=vigil-etcd");
    }
    // For the tests (the layout check compiles against the same headers)
    // and the bench example (its C baseline links the same library).
    let join = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
    println!("cargo:rustc-env=VIGIL_BUILD_LIB_DIRS={}", join(&found.lib_dirs));
    println!("cargo:rustc-env=VIGIL_BUILD_INCLUDE_DIRS={}", join(&found.include_dirs));
    // For dependents' build scripts (DEP_VIGIL_INCLUDE), as -sys crates do.
    if let Some(inc) = found.include_dirs.first() {
        println!("cargo:include={}", inc.display());
    }
}
