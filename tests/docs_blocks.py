#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every code block of docs/ and the READMEs, compiled or run (CTest: docs).

Usage: docs_blocks.py SOURCE_DIR BUILD_DIR [FILE.md ...]

Each Markdown file's blocks run in order, in a fresh temporary directory of
their own that looks like a checkout (the source tree's top-level entries
are linked there, python/ copied), with the built `vigil` first on PATH, an
install of the build in a prefix that pkg-config and the loader find, and
the built Python package importable. What each kind of block gets:

  c        a program (it has main) is compiled with the flags pkg-config
           gives and run; a fragment is compiled as a function's body
  python   run with the built package (placeholders such as do_work() come
           from tests/docs_stubs.py)
  rust     type-checked (cargo check, offline; not run) against the crate
           in rust/, as a program of a cargo project whose target directory
           stays in the build directory; a snippet becomes the body of a
           main returning a Result, after the placeholders of
           tests/docs_stubs.rs
  sh       run with bash -e
  ini      a systemd unit (`file NAME.service`): checked by systemd-analyze
           verify, with the installed vigil's path replaced by the build's;
           another ini file (`file NAME.conf`) is parsed
  tmpfiles a tmpfiles.d(5) file: applied by systemd-tmpfiles in a scratch
           root whose /etc names the users and groups it uses
  json     parsed
  text     shown output or a listing: nothing to run

Paths under /run/, /run/vigil/ and /dev/shm/ in a block are moved into
the temporary directory, and $XDG_RUNTIME_DIR is set to it, so examples
keep the paths a real deployment uses.

An HTML comment on the line before a block (invisible when rendered)
changes what is done with it; several directives are separated by ';':

  <!-- check: no-run: REASON -->    not run; REASON is printed (required)
  <!-- check: compile: REASON -->   compiled (c) or byte-compiled (python) only
                                    (these two come last: REASON is the rest)
  <!-- check: forever SECONDS -->   a loop that never ends: it must still run
                                    after SECONDS (then it is stopped), or end
                                    with status 0 before
  <!-- check: status N -->          the block must exit with status N
  <!-- check: etcd -->              needs etcd: run against the test fixture's,
                                    whose endpoints replace the block's
  <!-- check: file NAME -->         the block is written to NAME in the
                                    document's directory for the blocks after it
  <!-- check: args A B ... -->      a C program's arguments
  <!-- check: timeout SECONDS -->   a longer bound than the default 120 s
  <!-- check: same-as PATH -->      the block is the repository's file PATH, word
                                    for word (then checked as its language says)
  <!-- check: before COMMAND -->    a shell command run first (to make the
                                    files a block opens, say), in the open
  <!-- check: apart -->             the block runs in a directory of its own,
                                    beside the document's other blocks rather
                                    than after them (the document's `apart`
                                    blocks run in order, in one directory): for
                                    a long block the others do not need, such
                                    as an install into a virtual environment

No block is passed over silently: each is reported with what was done,
and a block of a language not listed above fails the test, as does a
reference to files outside the repository (../shared) or a relative link
to a file that does not exist.
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)(.*)$")
CHECK = re.compile(r"^\s*<!--\s*check:\s*(.*?)\s*-->\s*$")
RELOCATE = re.compile(r"(?<![\w./-])(/run/vigil(?![\w.-])/?|/dev/shm(?![\w.-])/?|/run/)")
ENDPOINTS = re.compile(r"https?://[\w.-]+:2379(?:,https?://[\w.-]+:2379)*")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
TIMEOUT = 120.0  # seconds a block may take, unless it says more (a loaded machine is slow)


@dataclass
class Block:
    path: str  # relative to the source
    line: int  # of the opening fence
    lang: str
    text: str
    directives: Dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse(path: str, rel: str) -> Tuple[List[Block], List[str]]:
    """The fenced blocks of a Markdown file, with their directives; and the
    problems found (an unclosed fence, a directive with nothing after it)."""
    blocks: List[Block] = []
    problems: List[str] = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    pending: Dict[str, str] = {}
    pending_line = 0
    while i < len(lines):
        m = CHECK.match(lines[i])
        if m:
            pending = directives(m.group(1))
            pending_line = i + 1
            i += 1
            continue
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip() and pending:
                problems.append(f"{rel}:{pending_line}: a check: comment not followed by a block")
                pending = {}
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i + 1
        body: List[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i >= len(lines):
            problems.append(f"{rel}:{start}: a block that is never closed")
        blocks.append(Block(rel, start, lang, "\n".join(body) + "\n", pending))
        pending = {}
        i += 1
    return blocks, problems


def directives(text: str) -> Dict[str, str]:
    """name -> value; `no-run:` and `compile:` take the rest of the comment."""
    out: Dict[str, str] = {}
    m = re.search(r"(?:^|;)\s*(no-run|compile)\s*:(.*)$", text)
    if m:
        out[m.group(1)] = m.group(2).strip()
        text = text[:m.start()]
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, value = part.partition(" ")
        out[name.strip()] = value.strip()
    return out


def links(path: str, rel: str, source: str) -> List[str]:
    """Relative links that lead nowhere, and references outside the repository."""
    problems = []
    text = open(path, encoding="utf-8").read()
    if re.search(r"(\.\./shared|/work/shared)", text):
        problems.append(f"{rel}: points outside the repository (../shared): the repository must stand alone")
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            continue
        full = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if not full.startswith(os.path.abspath(source)) or not os.path.exists(full):
            problems.append(f"{rel}: link to {target}: no such file in the repository")
    return problems


class Env:
    """What the blocks run with: the build, an install of it, the package."""

    def __init__(self, source: str, build: str, top: str) -> None:
        self.source, self.build, self.top = source, build, top
        self.prefix = os.path.join(top, "prefix")
        r = subprocess.run(["cmake", "--install", build, "--prefix", self.prefix],
                           capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise SystemExit(f"docs: cmake --install failed:\n{r.stdout}{r.stderr}")
        libs = [d for d in ("lib", "lib64") if os.path.isdir(os.path.join(self.prefix, d))]
        libs += [os.path.join("lib", d) for d in os.listdir(os.path.join(self.prefix, "lib"))
                 if os.path.isdir(os.path.join(self.prefix, "lib", d, "pkgconfig"))] if "lib" in libs else []
        self.libdir = next(os.path.join(self.prefix, d) for d in reversed(libs)
                           if os.path.exists(os.path.join(self.prefix, d, "libvigil.so.0")))
        self.python = next((p for p in ("/usr/bin/python3", shutil.which("python3")) if p and _has_cffi(p)), None)
        self.etcd = etcd_endpoints(build)
        self.is_root = os.geteuid() == 0

    def vars(self, work: str) -> Dict[str, str]:
        """The environment of a user who ran getting-started's install
        (make install PREFIX=$HOME/.local and its exports, CMAKE_PREFIX_PATH
        among them) and installed
        the Python package: $HOME/.local is the install made above."""
        env = dict(os.environ)
        for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VIGIL_LIBRARY", "VIGIL_ETCD_LIBRARY"):
            env.pop(k, None)
        home = os.path.join(work, "home")
        env.update(
            PATH=os.pathsep.join([os.path.join(work, "bin"), self.build, os.path.join(home, ".local", "bin"),
                                  env.get("PATH", "/usr/bin:/bin")]),
            PKG_CONFIG_PATH=os.path.join(self.libdir, "pkgconfig"),
            LD_LIBRARY_PATH=self.libdir,
            CMAKE_PREFIX_PATH=self.prefix,
            PYTHONPATH=os.path.join(self.source, "python"),
            PYTHONDONTWRITEBYTECODE="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            PIP_NO_INDEX="1",  # offline: a block that needs a download fails at once
            XDG_RUNTIME_DIR=os.path.join(work, "run"),
            HOME=home,
            TMPDIR=os.path.join(work, "tmp"),
            VIGIL_DOCS_STUBS=os.path.join(self.source, "tests", "docs_stubs.py"),
        )
        return env

    def prepare(self, work: str) -> None:
        """The document's directory: run/, home/ (with .local the install),
        tmp/, bin/ (python3: the one with cffi), and the checkout's files."""
        for sub in ("run", "home", "tmp", "bin"):
            os.makedirs(os.path.join(work, sub))
        os.symlink(self.prefix, os.path.join(work, "home", ".local"))
        if self.python:
            os.symlink(self.python, os.path.join(work, "bin", "python3"))
        checkout(self.source, work)
        os.symlink(self.build, os.path.join(work, "build"))


def _has_cffi(python: str) -> bool:
    return subprocess.run([python, "-c", "import cffi"], capture_output=True).returncode == 0


def etcd_endpoints(build: str) -> Optional[str]:
    state = os.environ.get("VIGIL_ETCD_STATE") or os.path.join(build, "etcd-test")
    try:
        with open(os.path.join(state, "endpoints")) as f:
            return f.read().strip() or None
    except OSError:
        return None


def checkout(source: str, work: str) -> None:
    """A directory that looks like the top of a checkout: links to the
    source's entries (python/ copied: installing it writes beside it)."""
    for name in os.listdir(source):
        if name.startswith(".") or name.startswith("build"):
            continue
        src = os.path.join(source, name)
        if name == "python":
            shutil.copytree(src, os.path.join(work, name),
                            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        else:
            os.symlink(src, os.path.join(work, name))


@dataclass
class Outcome:
    block: Block
    what: str  # what was done, or why not
    ok: bool
    seconds: float = 0.0
    output: str = ""


def run(argv: List[str], env: Dict[str, str], cwd: str, timeout: float,
        forever: Optional[float] = None) -> Tuple[Optional[int], str]:
    """(exit status, output); status None when a `forever` block was still
    running at its time (then stopped). The block's process group is
    killed when it ends: nothing it left in the background outlives it."""
    with tempfile.TemporaryFile(mode="w+", dir=cwd) as out:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        status: Optional[int]
        try:
            status = p.wait(timeout=forever if forever else timeout)
        except subprocess.TimeoutExpired:
            status = None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            if status is None:
                try:
                    p.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
        p.wait()
        out.seek(0)
        text = out.read()
    if status is None and not forever:
        return -1, text + f"\n(no end within {timeout:.0f} s)"
    return status, text


def relocate(text: str, work: str) -> str:
    """/run/vigil/x, /run/x and /dev/shm/x become WORK/run/x."""
    run_dir = os.path.join(work, "run")
    return RELOCATE.sub(lambda m: run_dir + ("/" if m.group(1).endswith("/") else ""), text)


def c_program(block: Block, text: str) -> str:
    """A fragment becomes the body of a function; a program stays as it is."""
    if re.search(r"\bmain\s*\(", text):
        return text
    head = [ln for ln in text.splitlines() if ln.startswith("#")]
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    return ("#include <vigil/vigil.h>\n" + "\n".join(head) + '\n#include "docs_stubs.h"\n'
            "#pragma GCC diagnostic ignored \"-Wunused-variable\"\n"
            "#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"\n"
            "int docs_fragment(void);\nint docs_fragment(void)\n{\n" + "\n".join(body) + "\n    return 0;\n}\n"
            "int main(void) { return 0; }\n")


def do_block(env: Env, block: Block, work: str, n: int) -> Outcome:
    d = block.directives
    if "no-run" in d:
        if not d["no-run"]:
            return Outcome(block, "no-run without a reason", False)
        return Outcome(block, f"not run: {d['no-run']}", True)
    if "same-as" in d:
        try:
            with open(os.path.join(env.source, d["same-as"]), encoding="utf-8") as f:
                original = f.read()
        except OSError as e:
            return Outcome(block, f"same-as {d['same-as']}: {e.strerror}", False)
        if original.rstrip() != block.text.rstrip():
            return Outcome(block, f"differs from {d['same-as']}: copy the file again", False)
    text = relocate(block.text, work)
    if "etcd" in d:
        if not env.etcd:
            return Outcome(block, "skipped: needs etcd, and the etcd fixture is not running", True)
        text = ENDPOINTS.sub(env.etcd, text)
    if "file" in d:
        with open(os.path.join(work, d["file"]), "w") as f:
            f.write(text)
    vars_ = env.vars(work)
    if "before" in d:
        status, out = run(["bash", "-e", "-c", relocate(d["before"], work)],
                          vars_, work, TIMEOUT)
        if status != 0:
            return Outcome(block, f"its `before` command failed (status {status})", False, 0.0, out)
    forever = float(d["forever"]) if "forever" in d else None
    limit = float(d.get("timeout", TIMEOUT))
    want = int(d.get("status", "0"))
    started = time.monotonic()
    lang = block.lang
    if lang == "c":
        src = os.path.join(work, f"block{n}.c")
        with open(src, "w") as f:
            f.write(c_program(block, text))
        pkgs = ["vigil"] + (["vigil-etcd"] if re.search(r"vigil/(etcd|group)\.h", text) else [])
        flags = subprocess.run(["pkg-config", "--cflags", "--libs"] + pkgs, env=vars_, capture_output=True,
                               text=True).stdout.split()
        exe = os.path.join(work, f"block{n}")
        status, out = run([os.environ.get("CC", "cc"), "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                           "-I", os.path.join(env.source, "tests"), "-o", exe, src] + flags +
                          [f"-Wl,-rpath,{env.libdir}"], vars_, work, TIMEOUT)
        if status != 0:
            return Outcome(block, "does not compile", False, time.monotonic() - started, out)
        if "compile" in d or not re.search(r"\bmain\s*\(", text):
            why = d.get("compile") or "a fragment"
            return Outcome(block, f"compiled ({why})", True, time.monotonic() - started)
        status, out = run([exe] + d.get("args", "").split(), vars_, work, limit, forever)
        return finish(block, "compiled and ran", status, want, forever, out, started)
    if lang == "python":
        if env.python is None:
            return Outcome(block, "skipped: no python3 with cffi", True)
        src = os.path.join(work, f"block{n}.py")
        with open(src, "w") as f:
            f.write(text)
        if "compile" in d:
            status, out = run([env.python, "-m", "py_compile", src], vars_, work, TIMEOUT)
            return finish(block, f"byte-compiled ({d['compile']})", status, 0, None, out, started)
        boot = ("import runpy, sys, os; exec(open(os.environ['VIGIL_DOCS_STUBS']).read(), "
                "{'__name__': 'docs_stubs'}); runpy.run_path(sys.argv[1], run_name='__main__')")
        status, out = run([env.python, "-c", boot, src], vars_, work, limit, forever)
        return finish(block, "ran", status, want, forever, out, started)
    if lang == "rust":
        return rust_block(env, block, text, work, n, started)
    if lang in ("sh", "bash", "shell"):
        status, out = run(["bash", "-e", "-c", text], vars_, work, limit, forever)
        return finish(block, "ran", status, want, forever, out, started)
    if lang == "ini":
        if "file" not in d:
            return Outcome(block, "an ini block needs `file NAME` (a unit's name)", False)
        if not re.search(r"\.(service|socket|timer|path|target|mount)$", d["file"]):
            import configparser
            try:
                configparser.ConfigParser(strict=True, interpolation=None).read_string(text)
            except configparser.Error as e:
                return Outcome(block, f"not a valid ini file: {e}", False)
            return Outcome(block, "parsed (an ini file, not a unit)", True)
        unit = os.path.join(work, "units", d["file"])
        os.makedirs(os.path.dirname(unit), exist_ok=True)
        tool = os.path.join(env.build, "vigil")
        with open(unit, "w") as f:
            f.write(re.sub(r"/usr/(local/)?bin/vigil\b", tool, text))
        if not shutil.which("systemd-analyze"):
            return Outcome(block, "written; not verified: no systemd-analyze here", True)
        status, out = run(["systemd-analyze", "verify", unit], vars_, work, TIMEOUT)
        if re.search(r"Unknown (key|section|lvalue)|Invalid|Failed to parse", out):
            status = status or 1  # a warning systemd ignores, a unit that does not do what it says
        return finish(block, "checked by systemd-analyze verify", status, 0, None, out, started)
    if lang == "tmpfiles":
        if not shutil.which("systemd-tmpfiles"):
            return Outcome(block, "not checked: no systemd-tmpfiles here", True)
        root = os.path.join(work, f"root{n}")
        os.makedirs(os.path.join(root, "etc"))
        names = sorted({w for line in text.splitlines() if line.strip() and not line.startswith("#")
                        for w in line.split()[3:5] if w not in ("-", "root")})
        with open(os.path.join(root, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0::/root:/bin/sh\n" + "".join(f"{u}:x:{900 + i}:{900 + i}::/:/bin/false\n"
                                                          for i, u in enumerate(names)))
        with open(os.path.join(root, "etc", "group"), "w") as f:
            f.write("root:x:0:\n" + "".join(f"{g}:x:{900 + i}:\n" for i, g in enumerate(names)))
        conf = os.path.join(work, d.get("file", f"block{n}.conf"))
        with open(conf, "w") as f:
            f.write(text)
        status, out = run(["systemd-tmpfiles", "--create", f"--root={root}", conf], vars_, work, TIMEOUT)
        return finish(block, "applied by systemd-tmpfiles --create in a scratch root", status, 0, None,
                      out, started)
    if lang == "json":
        try:
            json.loads(text)
        except ValueError as e:
            return Outcome(block, f"not JSON: {e}", False)
        return Outcome(block, "parsed", True)
    if lang in ("text", "console", "output"):
        return Outcome(block, "text: nothing to run", True)
    return Outcome(block, f"a block of language {lang or '(none)'}: give it one the runner knows, "
                          f"or `<!-- check: no-run: why -->`", False)


def rust_block(env: Env, block: Block, text: str, work: str, n: int, started: float) -> Outcome:
    """Compile a Rust block against the crate (cargo, offline)."""
    cargo = next((c for c in ("/usr/bin/cargo", shutil.which("cargo")) if c and os.access(c, os.X_OK)), None)
    if cargo is None:
        return Outcome(block, "skipped: no cargo here (apt-get install cargo)", True)
    project = os.path.join(work, f"rust{n}")
    os.makedirs(os.path.join(project, "src"))
    features = ', features = ["etcd"]' if os.path.exists(os.path.join(env.build, "libvigil-etcd.so.0")) else ""
    with open(os.path.join(project, "Cargo.toml"), "w") as f:
        f.write(f'[package]\nname = "docs-block-{n}"\nversion = "0.0.0"\nedition = "2021"\n\n'
                f'[dependencies]\nvigil = {{ path = "{os.path.join(env.source, "rust")}"{features} }}\n')
    # rustdoc's hidden lines ("# code", or a bare "#") are part of the program.
    text = "\n".join(ln[2:] if ln.startswith("# ") else "" if ln == "#" else ln for ln in text.splitlines())
    if re.search(r"\bfn\s+main\s*\(", text):
        program = text
    else:
        lines = text.splitlines()
        uses = [ln for ln in lines if ln.startswith("use ")]
        body = [ln for ln in lines if not ln.startswith("use ")]
        with open(os.path.join(env.source, "tests", "docs_stubs.rs")) as f:
            stubs = f.read()
        program = ("#![allow(unused, non_upper_case_globals, clippy::all)]\n" + "\n".join(uses) + "\n" + stubs +
                   "\nfn main() -> Result<(), Box<dyn std::error::Error>> {\n" + "\n".join(body) +
                   "\n    Ok(())\n}\n")
    with open(os.path.join(project, "src", "main.rs"), "w") as f:
        f.write(program)
    vars_ = env.vars(work)
    vars_.update(CARGO_TARGET_DIR=os.path.join(env.build, "docs-rust-target"), VIGIL_LIB_DIR=env.build,
                 VIGIL_INCLUDE_DIR=os.path.join(env.source, "include"), CARGO_TERM_COLOR="never",
                 PATH="/usr/bin:" + vars_["PATH"] if cargo == "/usr/bin/cargo" else vars_["PATH"])
    status, out = run([cargo, "check", "--offline", "--quiet", "--manifest-path",
                       os.path.join(project, "Cargo.toml")], vars_, work, 600.0)
    return finish(block, "compiled against the crate (cargo check)", status, 0, None, out, started)


def finish(block: Block, what: str, status: Optional[int], want: int, forever: Optional[float],
           out: str, started: float) -> Outcome:
    took = time.monotonic() - started
    if status is None:
        return Outcome(block, f"{what}; still running after {forever:g} s, as it should", True, took)
    if status != want:
        return Outcome(block, f"{what}: exit status {status}, want {want}", False, took, out)
    return Outcome(block, what + (f" (status {want}, as documented)" if want else ""), True, took)


Part = List[Tuple[int, Block]]  # blocks run in order in one directory, with their index


def parts(source: str, rel: str) -> Tuple[int, List[str], List[Part]]:
    """A document's block count, its problems, and its parts: the blocks
    run in order in the document's directory, and its `apart` ones."""
    path = os.path.join(source, rel)
    blocks, problems = parse(path, rel)
    problems += links(path, rel, source)
    main = [(i, b) for i, b in enumerate(blocks) if "apart" not in b.directives]
    apart = [(i, b) for i, b in enumerate(blocks) if "apart" in b.directives]
    return len(blocks), problems, [p for p in (main, apart) if p]


def cost(part: Part) -> float:
    """A guess at a part's length, for the longest to start first: a block
    counts 1, and one allowed more than the default time its share more."""
    return sum(1 + max(0.0, float(b.directives.get("timeout", TIMEOUT)) - TIMEOUT) / 20 for _, b in part)


def do_part(env: Env, part: Part) -> List[Tuple[int, Outcome]]:
    work = tempfile.mkdtemp(prefix="vigil-docs-", dir=env.top)
    env.prepare(work)
    return [(i, do_block(env, b, work, i)) for i, b in part]


def documents(source: str) -> List[str]:
    found = []
    for root, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith("build")
                         and d not in ("target", "node_modules"))
        rel = os.path.relpath(root, source)
        for f in sorted(files):
            if f == "README.md" or (f.endswith(".md") and (rel == "docs" or rel.startswith("docs" + os.sep))):
                found.append(os.path.normpath(os.path.join(rel, f)))
    return found


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    names = sys.argv[3:] or documents(source)
    docs = {rel: parts(source, rel) for rel in names}
    # Every part of every document, the longest first, so that the workers
    # end together; the report keeps the documents' order. Three at a time:
    # most blocks wait (on a ticker, a child, a sleep) more than they compute.
    order = sorted(((rel, part) for rel in names for part in docs[rel][2]), key=lambda job: -cost(job[1]))
    top = tempfile.mkdtemp(prefix="vigil-docs-")
    try:
        env = Env(source, build, top)
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            outcomes: Dict[str, Dict[int, Outcome]] = {rel: {} for rel in names}
            for (rel, _), done in zip(order, pool.map(lambda job: do_part(env, job[1]), order)):
                outcomes[rel].update(done)
            results = [([outcomes[rel][i] for i in range(docs[rel][0])], docs[rel][1]) for rel in names]
    finally:
        shutil.rmtree(top, ignore_errors=True)
    failed = 0
    counts: Dict[str, int] = {}
    for outcomes, problems in results:
        for p in problems:
            print(f"FAIL {p}")
            failed += 1
        for o in outcomes:
            kind = ("failed" if not o.ok else "not run" if o.what.startswith(("not run", "skipped"))
                    else "text" if o.what.startswith("text") else "checked")
            counts[kind] = counts.get(kind, 0) + 1
            print(f"{'ok  ' if o.ok else 'FAIL'} {o.block.where} [{o.block.lang or '-'}] {o.what}"
                  + (f" ({o.seconds:.1f} s)" if o.seconds >= 0.05 else ""))
            if not o.ok:
                failed += 1
                if o.output:
                    print("     | " + "\n     | ".join(o.output.rstrip().splitlines()[-40:]))
    print(f"docs: {len(names)} files; " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; {failed} problems")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
