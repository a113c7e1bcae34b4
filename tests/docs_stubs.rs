// Placeholders for the reader's own code in the documentation's Rust
// snippets (tests/docs_blocks.py compiles each snippet as the body of a
// main after these): the work a worker does, what a watchdog does with
// reclaimed units, the size of a group.
const group: u32 = 4;
fn requeue<T>(_units: T) {}
fn write_report<T>(_token: T) -> Result<(), vigil::Error> {
    Ok(())
}
fn do_work<T>(_unit: T) {}
