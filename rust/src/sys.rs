//! The C API, declared by hand from `include/vigil/*.h`.
//!
//! Every struct that crosses the boundary is declared once below, in
//! `shared_structs!`, with the size and field offsets the headers give it.
//! The sizes are checked when the crate compiles; the offsets (which Rust
//! 1.63 cannot compute in a constant) and the sizes are checked against the
//! C compiler's view of the installed headers by `tests::layout_matches_c`,
//! which writes and runs a C program from this same table. A change of
//! layout in the headers (a new layout version, a field added at the end)
//! is made here, and only here.
//!
//! Out-parameters of the structs the headers say "fields may be added at
//! the end" are passed inside [`Spare`], so a newer library writing a longer
//! struct writes into spare room instead of past the caller's value.

#![allow(non_camel_case_types, dead_code)]

use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// The C `gid_t` (Linux: 32 bits).
#[allow(non_camel_case_types)]
pub type gid_t = u32;

// ---- error codes (include/vigil/common.h) ---------------------------------

pub const VIGIL_EFULL: c_int = -1001;
pub const VIGIL_EBADFILE: c_int = -1002;
pub const VIGIL_ECAPACITY: c_int = -1003;
pub const VIGIL_ERANGE: c_int = -1004;
pub const VIGIL_EVACANT: c_int = -1005;
pub const VIGIL_ETIMEDOUT: c_int = -1006;
pub const VIGIL_ENOPEERS: c_int = -1007;
pub const VIGIL_ELOST: c_int = -1008;
pub const VIGIL_EBUSY: c_int = -1009;
pub const VIGIL_ETLS: c_int = -1010;
pub const VIGIL_EUNTRUSTED: c_int = -1011;
pub const VIGIL_OPEN_READONLY: c_uint = 0x1;
pub const VIGIL_OPEN_TRUST_OWNER: c_uint = 0x2;
/// The layout version every vigil file carries at offset 8.
pub const VIGIL_LAYOUT_VERSION: u32 = 6;

pub const VIGIL_ROLE_WORKER: u32 = 0;
pub const VIGIL_ROLE_COORDINATOR: u32 = 1;
pub const VIGIL_SERIAL: c_int = 1;
pub const VIGIL_RECLAIM_STALE: u32 = 1;
pub const VIGIL_RECLAIM_EXITED: u32 = 2;
pub const VIGIL_LEASE_VACANT: u32 = 0;
pub const VIGIL_LEASE_HELD: u32 = 1;
pub const VIGIL_LEASE_EXPIRED: u32 = 2;
pub const VIGIL_LEASE_RELEASED: u32 = 3;
pub const VIGIL_LEASE_CHANGING: u32 = 4;
pub const VIGIL_KIND_HEARTBEAT: u32 = 1;
pub const VIGIL_KIND_BARRIER: u32 = 2;
pub const VIGIL_KIND_LEASES: u32 = 3;

/// A C struct for which all-zero bytes are a value.
///
/// # Safety
///
/// Implemented only by `shared_structs!` below, for `repr(C)` structs whose
/// fields are integers (plain or atomic), arrays of them, raw pointers and
/// `Option`s of function pointers: zero is a value of each (0, NULL, None).
pub unsafe trait Plain {}

/// Spare room after an out-parameter whose C struct may grow at the end.
#[repr(C)]
pub struct Spare<T> {
    pub value: T,
    _room: [u64; 8],
}

impl<T: Plain + Copy> Spare<T> {
    /// A zeroed value with its spare room.
    pub fn zeroed() -> Self {
        // SAFETY: T is Plain (all-zero is a value of it), and the room is
        // integers.
        unsafe { std::mem::zeroed() }
    }
}

// ---- opaque handles -------------------------------------------------------

/// `vigil_hb`: the heartbeat handle. Its fields are public in C for the
/// inline beat; Rust reaches them only through `vigil_hb_beater`.
#[repr(C)]
pub struct vigil_hb {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct vigil_barrier {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct vigil_leases {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct vigil_keepalive {
    _opaque: [u8; 0],
}
#[cfg(feature = "etcd")]
#[repr(C)]
pub struct vigil_etcd {
    _opaque: [u8; 0],
}

// ---- the shared structs, with their layouts ----------------------------------

/// Declares each struct and, for the checks, its C name, size and offsets.
macro_rules! shared_structs {
    ($(
        $(@cfg($cfg:meta))?
        $(@align($align:literal))?
        $(#[$meta:meta])*
        $cname:literal => struct $name:ident : $size:literal {
            $($field:ident : $ty:ty = $off:literal),* $(,)?
        }
    )*) => {
        $(
            $(#[cfg($cfg)])?
            $(#[$meta])*
            #[repr(C)]
            $(#[repr(align($align))])?
            pub struct $name {
                $(pub $field: $ty),*
            }
            $(#[cfg($cfg)])?
            // SAFETY: the fields the table below gives every struct are
            // integers (plain or atomic), arrays of them, raw pointers and
            // Options of fn pointers (the trait's contract).
            unsafe impl Plain for $name {}
            $(#[cfg($cfg)])?
            const _: () = assert!(
                std::mem::size_of::<$name>() == $size,
                concat!("size of ", $cname, " differs from the headers' (sys.rs)")
            );
        )*

        /// Every shared struct: C name, Rust size and alignment, the size
        /// the headers give, and per field its Rust and expected offsets.
        #[cfg(test)]
        pub fn layouts() -> Vec<Layout> {
            let mut all = Vec::new();
            $(
                $(#[cfg($cfg)])?
                {
                let u = std::mem::MaybeUninit::<$name>::uninit();
                let base = u.as_ptr();
                all.push(Layout {
                    c_name: $cname,
                    size: std::mem::size_of::<$name>(),
                    align: std::mem::align_of::<$name>(),
                    expected_size: $size,
                    fields: vec![$(
                        (
                            stringify!($field),
                            // SAFETY: addr_of! on a field of an uninit value
                            // forms no reference and reads nothing.
                            unsafe { std::ptr::addr_of!((*base).$field) as usize - base as usize },
                            $off,
                        )
                    ),*],
                });
                }
            )*
            all
        }
    };
}

#[cfg(test)]
pub struct Layout {
    pub c_name: &'static str,
    pub size: usize,
    pub align: usize,
    pub expected_size: usize,
    pub fields: Vec<(&'static str, usize, usize)>,
}

shared_structs! {
    @align(16)
    /// The file header (offsets 0..63 of a heartbeat table), read and
    /// written only by the C library; here for the layout check.
    "struct vigil_hb_header" => struct vigil_hb_header: 64 {
        magic: [u8; 8] = 0,
        version: u32 = 8,
        kind: u32 = 12,
        capacity: u32 = 16,
        flags: u32 = 20,
        epoch: AtomicU64 = 24,
        term: AtomicU64 = 32,
        leader: AtomicU64 = 40,
        elect_lock: AtomicU64 = 48,
        elect_seq: AtomicU64 = 56,
    }
    @align(64)
    /// One slot of a heartbeat table (since layout version 4, `gen` names the
    /// registration), read and written only by the C library; here for the
    /// layout check. Its 64-byte alignment is the C one.
    "struct vigil_hb_slot" => struct vigil_hb_slot: 64 {
        pid: AtomicU32 = 0,
        role: AtomicU32 = 4,
        last_seen_epoch: AtomicU64 = 8,
        in_flight: AtomicU64 = 16,
        gen: AtomicU64 = 24,
        writer: AtomicU64 = 32,
        seq: AtomicU64 = 40,
        start_time: AtomicU32 = 48,
        owner_ns: AtomicU32 = 52,
        reclaims: AtomicU32 = 56,
        repairs: AtomicU32 = 60,
    }
    #[derive(Clone, Copy)]
    "vigil_slot_info" => struct vigil_slot_info: 24 {
        pid: u32 = 0,
        role: u32 = 4,
        last_seen_epoch: u64 = 8,
        in_flight: u64 = 16,
    }
    #[derive(Clone, Copy)]
    "vigil_hb_counters" => struct vigil_hb_counters: 48 {
        registers: u64 = 0,
        unregisters: u64 = 8,
        reclaims: u64 = 16,
        repairs: u64 = 24,
        leader_changes: u64 = 32,
        occupied: u32 = 40,
    }
    /// The beat's two words; AtomicU64 has the layout of `_Atomic uint64_t`.
    #[derive(Clone, Copy)]
    "vigil_beater" => struct vigil_beater: 16 {
        epoch: *const AtomicU64 = 0,
        seen: *const AtomicU64 = 8,
    }
    #[derive(Clone, Copy)]
    "vigil_reclaim" => struct vigil_reclaim: 16 {
        slot: u32 = 0,
        pid: u32 = 4,
        in_flight: u64 = 8,
    }
    #[derive(Clone, Copy)]
    "vigil_leader" => struct vigil_leader: 16 {
        slot: u32 = 0,
        pid: u32 = 4,
        term: u64 = 8,
    }
    #[derive(Clone, Copy)]
    "vigil_failover_watch_info" => struct vigil_failover_watch_info: 16 {
        pidfds: u32 = 0,
        watched: u32 = 4,
        by_epochs: u32 = 8,
        retrying: u32 = 12,
    }
    #[derive(Clone, Copy)]
    "vigil_barrier_state" => struct vigil_barrier_state: 40 {
        capacity: u32 = 0,
        epoch: u32 = 4,
        arrived: u32 = 8,
        recorded: u32 = 12,
        grace_epochs: u64 = 16,
        sleepers: u32 = 24,
        withdrawals: u64 = 32,
    }
    #[derive(Clone, Copy)]
    "vigil_barrier_counters" => struct vigil_barrier_counters: 16 {
        releases: u64 = 0,
        withdrawals: u64 = 8,
    }
    #[derive(Clone, Copy)]
    "vigil_barrier_peer" => struct vigil_barrier_peer: 24 {
        slot: u32 = 0,
        why: u32 = 4,
        gen: u64 = 8,
        pid: u32 = 16,
    }
    #[derive(Clone, Copy)]
    "vigil_barrier_round" => struct vigil_barrier_round: 72 {
        round: u32 = 0,
        kept: u32 = 4,
        serial_slot: u32 = 8,
        serial_gen: u64 = 16,
        counted: u32 = 24,
        unbound: u32 = 28,
        left_out: u32 = 32,
        counted_peers: *mut vigil_barrier_peer = 40,
        counted_cap: u32 = 48,
        left_out_peers: *mut vigil_barrier_peer = 56,
        left_out_cap: u32 = 64,
    }
    #[derive(Clone, Copy)]
    "vigil_lease" => struct vigil_lease: 216 {
        key: [c_char; 128] = 0,
        owner: [c_char; 64] = 128,
        token: u64 = 192,
        ttl_ms: u64 = 200,
        id: i64 = 208,
    }
    #[derive(Clone, Copy)]
    "vigil_lease_port" => struct vigil_lease_port: 16 {
        ctx: *mut c_void = 0,
        renew: Option<unsafe extern "C" fn(*mut c_void, *const vigil_lease) -> c_int> = 8,
    }
    #[derive(Clone, Copy)]
    "vigil_keepalive_info" => struct vigil_keepalive_info: 40 {
        period_ns: u64 = 0,
        renewals: u64 = 8,
        failures: u64 = 16,
        consecutive_failures: u32 = 24,
        lost: u32 = 28,
        cpu_ns: u64 = 32,
    }
    #[derive(Clone, Copy)]
    "vigil_lease_info" => struct vigil_lease_info: 224 {
        key: [c_char; 128] = 0,
        owner: [c_char; 64] = 128,
        token: u64 = 192,
        ttl_ms: u64 = 200,
        expires_in_ms: i64 = 208,
        state: u32 = 216,
        pid: u32 = 220,
    }
    #[derive(Clone, Copy)]
    "vigil_leases_counters" => struct vigil_leases_counters: 24 {
        handovers: u64 = 0,
        renewals_refused: u64 = 8,
        expiries: u64 = 16,
    }
    #[derive(Clone, Copy)]
    "vigil_file_info" => struct vigil_file_info: 24 {
        kind: u32 = 0,
        version: u32 = 4,
        capacity: u32 = 8,
        size: u64 = 16,
    }
    @cfg(feature = "etcd")
    #[derive(Clone, Copy)]
    "struct vigil_etcd_options" => struct vigil_etcd_options: 56 {
        cacert: *const c_char = 0,
        cert: *const c_char = 8,
        key: *const c_char = 16,
        user: *const c_char = 24,
        password: *const c_char = 32,
        namespace: *const c_char = 40,
        dial_timeout_ms: u32 = 48,
        request_timeout_ms: u32 = 52,
    }
}

/// The constants above, by their C names, for the layout check.
#[cfg(test)]
pub fn constants() -> Vec<(&'static str, i64)> {
    macro_rules! c {
        ($($name:ident),* $(,)?) => { vec![$((stringify!($name), $name as i64)),*] };
    }
    c![
        VIGIL_EFULL, VIGIL_EBADFILE, VIGIL_ECAPACITY, VIGIL_ERANGE, VIGIL_EVACANT,
        VIGIL_ETIMEDOUT, VIGIL_ENOPEERS, VIGIL_ELOST, VIGIL_EBUSY, VIGIL_ETLS, VIGIL_EUNTRUSTED,
        VIGIL_OPEN_READONLY, VIGIL_OPEN_TRUST_OWNER, VIGIL_LAYOUT_VERSION,
        VIGIL_ROLE_WORKER,
        VIGIL_ROLE_COORDINATOR, VIGIL_SERIAL, VIGIL_RECLAIM_STALE, VIGIL_RECLAIM_EXITED,
        VIGIL_LEASE_VACANT, VIGIL_LEASE_HELD, VIGIL_LEASE_EXPIRED, VIGIL_LEASE_RELEASED,
        VIGIL_LEASE_CHANGING, VIGIL_KIND_HEARTBEAT, VIGIL_KIND_BARRIER, VIGIL_KIND_LEASES,
    ]
}

// ---- functions ------------------------------------------------------------

extern "C" {
    pub fn vigil_strerror(err: c_int) -> *const c_char;
    pub fn vigil_file_probe(path: *const c_char, out: *mut vigil_file_info) -> c_int;

    // heartbeat.h
    pub fn vigil_hb_create(path: *const c_char, capacity: u32, out: *mut *mut vigil_hb) -> c_int;
    pub fn vigil_hb_create_mode(path: *const c_char, capacity: u32, mode: c_uint, out: *mut *mut vigil_hb)
        -> c_int;
    pub fn vigil_hb_open(path: *const c_char, capacity: u32, out: *mut *mut vigil_hb) -> c_int;
    pub fn vigil_hb_open_flags(path: *const c_char, capacity: u32, flags: c_uint, out: *mut *mut vigil_hb) -> c_int;
    pub fn vigil_hb_create_group(
        path: *const c_char,
        capacity: u32,
        mode: c_uint,
        group: gid_t,
        out: *mut *mut vigil_hb,
    ) -> c_int;
    pub fn vigil_hb_open_readonly(path: *const c_char, capacity: u32, out: *mut *mut vigil_hb) -> c_int;
    pub fn vigil_hb_close(hb: *mut vigil_hb);
    pub fn vigil_hb_capacity(hb: *const vigil_hb) -> u32;
    pub fn vigil_hb_register(hb: *mut vigil_hb, pid: u32, slot: *mut u32) -> c_int;
    pub fn vigil_hb_unregister(hb: *mut vigil_hb, slot: u32) -> c_int;
    pub fn vigil_hb_tick(hb: *mut vigil_hb) -> u64;
    pub fn vigil_hb_epoch(hb: *const vigil_hb) -> u64;
    // Macros over an inline body in C; the library exports them as functions.
    pub fn vigil_hb_mark_in_flight(hb: *mut vigil_hb, slot: u32, bit: c_uint) -> c_int;
    pub fn vigil_hb_clear_in_flight(hb: *mut vigil_hb, slot: u32, bit: c_uint) -> c_int;
    pub fn vigil_hb_set_role(hb: *mut vigil_hb, slot: u32, role: u32) -> c_int;
    pub fn vigil_hb_snapshot(hb: *const vigil_hb, slot: u32, out: *mut vigil_slot_info) -> c_int;
    pub fn vigil_hb_live_count(hb: *const vigil_hb, grace_epochs: u64) -> u32;
    pub fn vigil_hb_owned(hb: *const vigil_hb, slot: u32) -> c_int;
    pub fn vigil_hb_stats(hb: *const vigil_hb, out: *mut vigil_hb_counters) -> c_int;
    pub fn vigil_hb_beater(hb: *mut vigil_hb, slot: u32) -> vigil_beater;

    // failover.h
    pub fn vigil_failover_scan(hb: *mut vigil_hb, grace_epochs: u64, out: *mut vigil_reclaim, max: u32) -> c_int;
    pub fn vigil_failover_scan_probe(hb: *mut vigil_hb, grace_epochs: u64, out: *mut vigil_reclaim, max: u32)
        -> c_int;
    pub fn vigil_leader_elect(hb: *mut vigil_hb, grace_epochs: u64, out: *mut vigil_leader) -> c_int;
    pub fn vigil_leader_is(hb: *const vigil_hb, slot: u32, grace_epochs: u64) -> bool;
    pub fn vigil_leader_get(hb: *const vigil_hb, out: *mut vigil_leader) -> c_int;
    pub fn vigil_hb_probe(hb: *const vigil_hb, slot: u32) -> c_int;
    pub fn vigil_failover_wait_why(
        hb: *mut vigil_hb,
        grace_epochs: u64,
        timeout_ns: u64,
        out: *mut vigil_reclaim,
        why: *mut u32,
        max: u32,
    ) -> c_int;
    pub fn vigil_failover_wait_info(hb: *const vigil_hb, out: *mut vigil_failover_watch_info) -> c_int;

    // barrier.h
    pub fn vigil_barrier_create(
        path: *const c_char,
        hb: *mut vigil_hb,
        grace_epochs: u64,
        out: *mut *mut vigil_barrier,
    ) -> c_int;
    pub fn vigil_barrier_create_mode(
        path: *const c_char,
        hb: *mut vigil_hb,
        grace_epochs: u64,
        mode: c_uint,
        out: *mut *mut vigil_barrier,
    ) -> c_int;
    pub fn vigil_barrier_open(
        path: *const c_char,
        hb: *mut vigil_hb,
        grace_epochs: u64,
        out: *mut *mut vigil_barrier,
    ) -> c_int;
    pub fn vigil_barrier_open_flags(
        path: *const c_char,
        hb: *mut vigil_hb,
        grace_epochs: u64,
        flags: c_uint,
        out: *mut *mut vigil_barrier,
    ) -> c_int;
    pub fn vigil_barrier_create_group(
        path: *const c_char,
        hb: *mut vigil_hb,
        grace_epochs: u64,
        mode: c_uint,
        group: gid_t,
        out: *mut *mut vigil_barrier,
    ) -> c_int;
    pub fn vigil_barrier_close(b: *mut vigil_barrier);
    pub fn vigil_barrier_wait(b: *mut vigil_barrier, my_epoch: u32) -> c_int;
    pub fn vigil_barrier_wait_quorum(b: *mut vigil_barrier, my_epoch: u32, quorum: u32) -> c_int;
    pub fn vigil_barrier_wait_timeout(b: *mut vigil_barrier, my_epoch: u32, timeout_ns: u64) -> c_int;
    pub fn vigil_barrier_wait_quorum_timeout(b: *mut vigil_barrier, my_epoch: u32, quorum: u32, timeout_ns: u64)
        -> c_int;
    pub fn vigil_barrier_epoch(b: *const vigil_barrier) -> u32;
    pub fn vigil_barrier_live_peers(b: *const vigil_barrier) -> u32;
    pub fn vigil_barrier_bind(b: *mut vigil_barrier, slot: u32) -> c_int;
    pub fn vigil_barrier_peek(path: *const c_char, out: *mut vigil_barrier_state) -> c_int;
    pub fn vigil_barrier_stats(b: *const vigil_barrier, out: *mut vigil_barrier_counters) -> c_int;
    pub fn vigil_barrier_start(
        b: *mut vigil_barrier,
        participants: u32,
        timeout_ns: u64,
        first_round: *mut u32,
    ) -> c_int;
    pub fn vigil_barrier_start_slice(
        b: *mut vigil_barrier,
        participants: u32,
        slice_ns: u64,
        arrived: *mut c_int,
        round: *mut u32,
    ) -> c_int;
    pub fn vigil_barrier_wait_slice(
        b: *mut vigil_barrier,
        my_epoch: u32,
        quorum: u32,
        slice_ns: u64,
        arrived: *mut c_int,
    ) -> c_int;
    pub fn vigil_barrier_withdraw(b: *mut vigil_barrier, my_epoch: u32, arrived: *mut c_int) -> c_int;
    pub fn vigil_barrier_round_info(b: *const vigil_barrier, round: u32, info: *mut vigil_barrier_round) -> c_int;

    // lease.h
    pub fn vigil_keepalive_start(
        port: *const vigil_lease_port,
        lease: *const vigil_lease,
        out: *mut *mut vigil_keepalive,
    ) -> c_int;
    pub fn vigil_keepalive_stop(ka: *mut vigil_keepalive) -> c_int;
    pub fn vigil_keepalive_lost(ka: *const vigil_keepalive) -> bool;
    pub fn vigil_keepalive_fd(ka: *const vigil_keepalive) -> c_int;
    pub fn vigil_keepalive_stats(ka: *const vigil_keepalive, out: *mut vigil_keepalive_info) -> c_int;

    pub fn vigil_leases_create(path: *const c_char, capacity: u32, out: *mut *mut vigil_leases) -> c_int;
    pub fn vigil_leases_create_mode(path: *const c_char, capacity: u32, mode: c_uint, out: *mut *mut vigil_leases)
        -> c_int;
    pub fn vigil_leases_open(path: *const c_char, out: *mut *mut vigil_leases) -> c_int;
    pub fn vigil_leases_open_readonly(path: *const c_char, out: *mut *mut vigil_leases) -> c_int;
    pub fn vigil_leases_open_flags(path: *const c_char, flags: c_uint, out: *mut *mut vigil_leases) -> c_int;
    pub fn vigil_leases_create_group(
        path: *const c_char,
        capacity: u32,
        mode: c_uint,
        group: gid_t,
        out: *mut *mut vigil_leases,
    ) -> c_int;
    pub fn vigil_leases_close(ls: *mut vigil_leases);
    pub fn vigil_leases_capacity(ls: *const vigil_leases) -> u32;
    pub fn vigil_leases_acquire(
        ls: *mut vigil_leases,
        key: *const c_char,
        owner: *const c_char,
        ttl_ms: u64,
        out: *mut vigil_lease,
    ) -> c_int;
    pub fn vigil_leases_acquire_wait(
        ls: *mut vigil_leases,
        key: *const c_char,
        owner: *const c_char,
        ttl_ms: u64,
        timeout_ns: u64,
        out: *mut vigil_lease,
    ) -> c_int;
    pub fn vigil_leases_renew(ls: *mut vigil_leases, lease: *const vigil_lease) -> c_int;
    pub fn vigil_leases_release(ls: *mut vigil_leases, lease: *const vigil_lease) -> c_int;
    pub fn vigil_leases_port(ls: *mut vigil_leases) -> vigil_lease_port;
    pub fn vigil_leases_get(ls: *mut vigil_leases, key: *const c_char, out: *mut vigil_lease_info) -> c_int;
    pub fn vigil_leases_entry(ls: *const vigil_leases, index: u32, out: *mut vigil_lease_info) -> c_int;
    pub fn vigil_leases_stats(ls: *const vigil_leases, out: *mut vigil_leases_counters) -> c_int;
}

// etcd.h (libvigil-etcd)
#[cfg(feature = "etcd")]
extern "C" {
    pub fn vigil_etcd_connect(endpoints: *const c_char, out: *mut *mut vigil_etcd) -> c_int;
    pub fn vigil_etcd_connect_opts(
        endpoints: *const c_char,
        opts: *const vigil_etcd_options,
        out: *mut *mut vigil_etcd,
    ) -> c_int;
    pub fn vigil_etcd_close(e: *mut vigil_etcd);
    pub fn vigil_etcd_acquire(
        e: *mut vigil_etcd,
        key: *const c_char,
        owner: *const c_char,
        ttl_ms: u64,
        out: *mut vigil_lease,
    ) -> c_int;
    pub fn vigil_etcd_renew(e: *mut vigil_etcd, lease: *const vigil_lease) -> c_int;
    pub fn vigil_etcd_release(e: *mut vigil_etcd, lease: *const vigil_lease) -> c_int;
    pub fn vigil_etcd_port(e: *mut vigil_etcd) -> vigil_lease_port;
    pub fn vigil_etcd_get(e: *mut vigil_etcd, key: *const c_char, out: *mut vigil_lease_info) -> c_int;
    pub fn vigil_etcd_acquire_wait(
        e: *mut vigil_etcd,
        key: *const c_char,
        owner: *const c_char,
        ttl_ms: u64,
        timeout_ns: u64,
        out: *mut vigil_lease,
    ) -> c_int;
    pub fn vigil_etcd_set_timeout(e: *mut vigil_etcd, connect_ms: u32, total_ms: u32) -> c_int;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::fmt::Write as _;
    use std::process::Command;

    /// A C program printing what the compiler makes of every entry of the
    /// table, from the headers the crate was built against.
    fn c_program() -> String {
        let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <vigil/vigil.h>\n");
        if cfg!(feature = "etcd") {
            c.push_str("#include <vigil/etcd.h>\n");
        }
        c.push_str("int main(void)\n{\n");
        for l in layouts() {
            let t = l.c_name;
            let _ = writeln!(c, "    printf(\"size {t} %zu\\n\", sizeof({t}));");
            let _ = writeln!(c, "    printf(\"align {t} %zu\\n\", _Alignof({t}));");
            for (f, _, _) in &l.fields {
                let _ = writeln!(c, "    printf(\"offset {t}.{f} %zu\\n\", offsetof({t}, {f}));");
            }
        }
        for (name, _) in constants() {
            let _ = writeln!(c, "    printf(\"const {name} %lld\\n\", (long long)({name}));");
        }
        c.push_str("    return 0;\n}\n");
        c
    }

    #[test]
    fn layout_matches_c() {
        let dir = std::env::temp_dir().join(format!("vigil-rs-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("layout.c");
        let exe = dir.join("layout");
        std::fs::write(&src, c_program()).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let mut cmd = Command::new(&cc);
        cmd.arg("-std=c11").arg("-Wall").arg("-Werror");
        for inc in env!("VIGIL_BUILD_INCLUDE_DIRS").split(':').filter(|s| !s.is_empty()) {
            cmd.arg(format!("-I{inc}"));
        }
        cmd.arg(&src).arg("-o").arg(&exe);
        let out = match cmd.output() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("layout_matches_c: skipped, no C compiler ({cc}: {e})");
                return;
            }
        };
        assert!(
            out.status.success(),
            "the layout check does not compile against the headers (a field renamed or gone?):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let c: HashMap<String, i64> = String::from_utf8(run.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                let (k, v) = line.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        let mut wrong = Vec::new();
        for l in layouts() {
            let t = l.c_name;
            let c_size = c[&format!("size {t}")] as usize;
            if l.size != c_size || l.expected_size != c_size {
                wrong.push(format!("sizeof({t}): C {c_size}, Rust {}, table {}", l.size, l.expected_size));
            }
            let c_align = c[&format!("align {t}")] as usize;
            if l.align != c_align {
                wrong.push(format!("alignof({t}): C {c_align}, Rust {}", l.align));
            }
            for (f, rust, table) in &l.fields {
                let c_off = c[&format!("offset {t}.{f}")] as usize;
                if *rust != c_off || *table != c_off {
                    wrong.push(format!("offsetof({t}, {f}): C {c_off}, Rust {rust}, table {table}"));
                }
            }
        }
        for (name, value) in constants() {
            let c_value = c[&format!("const {name}")];
            if c_value != value {
                wrong.push(format!("{name}: C {c_value}, Rust {value}"));
            }
        }
        assert!(wrong.is_empty(), "sys.rs disagrees with the headers:\n  {}", wrong.join("\n  "));
    }

    #[test]
    fn atomics_have_the_c_layout() {
        // The beater's words are _Atomic uint64_t in C, AtomicU64 here.
        assert_eq!(std::mem::size_of::<AtomicU64>(), 8);
        assert_eq!(std::mem::align_of::<AtomicU64>(), 8);
    }
}
