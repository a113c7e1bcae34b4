/* One source, built both as C (cc) and as C++17 (g++, clang++) by
 * tests/install_consumer.sh against the installed headers: each instance
 * registers in the same table, beats (the inline beat and a beater), marks
 * a unit in flight and meets the others at the same barrier for ROUNDS
 * rounds. Usage: consumer_pair TABLE BARRIER GROUP */
#include <vigil/vigil.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ROUNDS 50

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    uint32_t group = (uint32_t)atoi(argv[3]);
    vigil_hb *hb = NULL;
    vigil_barrier *b = NULL;
    uint32_t slot = 0;
    int rc = vigil_hb_open(argv[1], 0, &hb);
    if (rc == 0)
        rc = vigil_barrier_open(argv[2], hb, 0, &b);
    if (rc == 0)
        rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot);
    if (rc == 0)
        rc = vigil_barrier_bind(b, slot);
    if (rc == 0)
        rc = vigil_hb_mark_in_flight(hb, slot, 5);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], vigil_strerror(rc));
        return 1;
    }
    vigil_beater beater = vigil_hb_beater(hb, slot);
    vigil_hb_beat(hb, slot);
    rc = vigil_barrier_wait_quorum(b, 0, group); /* the start gate */
    for (uint32_t r = 1; rc >= 0 && r <= ROUNDS; r++) {
        vigil_beater_beat(beater);
        rc = vigil_barrier_wait(b, r);
    }
    vigil_slot_info info;
    int snap = vigil_hb_snapshot(hb, slot, &info);
    if (rc < 0 || snap != 0 || info.pid != (uint32_t)getpid() || info.in_flight != (UINT64_C(1) << 5)) {
        fprintf(stderr, "barrier %d, snapshot %d: pid %u in flight %llx\n", rc, snap, info.pid,
                (unsigned long long)info.in_flight);
        return 1;
    }
    vigil_hb_clear_in_flight(hb, slot, 5);
    vigil_hb_unregister(hb, slot);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}
