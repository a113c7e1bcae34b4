/* The README's example: a worker registers, beats, marks a unit of work,
 * and an observer reads its slot. Usage: hello [FILE] */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <vigil/vigil.h>

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/vigil-hello.hb";
    vigil_hb *hb;
    int rc = vigil_hb_create(path, 64, &hb);
    if (rc == -EEXIST)
        rc = vigil_hb_open(path, 64, &hb);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, vigil_strerror(rc));
        return 1;
    }
    uint32_t slot;
    if ((rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot)) < 0) {
        fprintf(stderr, "%s: register: %s\n", path, vigil_strerror(rc));
        return 1;
    }
    vigil_hb_tick(hb);                   /* normally the watchdog's job */
    vigil_hb_beat(hb, slot);             /* about a nanosecond */
    vigil_hb_mark_in_flight(hb, slot, 3); /* unit 3 is ours now */

    vigil_slot_info info;
    if (vigil_hb_snapshot(hb, slot, &info) == 0)
        printf("slot %u: pid %u, last seen at epoch %llu, in flight %#llx, %u live\n",
               slot, info.pid, (unsigned long long)info.last_seen_epoch,
               (unsigned long long)info.in_flight, vigil_hb_live_count(hb, 5));

    vigil_hb_clear_in_flight(hb, slot, 3);
    vigil_hb_unregister(hb, slot);
    vigil_hb_close(hb);
    unlink(path);
    return 0;
}
