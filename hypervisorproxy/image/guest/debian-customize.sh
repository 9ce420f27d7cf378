#!/bin/sh
# debian-customize.sh ROOT FILES: mmdebstrap's customize hook of the Debian
# image (docs/design.md, "The Debian image"): metasched's files into the
# tree at ROOT, from the directory FILES, the MPI example built with mpicc,
# and what would make two builds or two VMs differ taken out.
set -eu
root=$1 files=$2

install -m 0755 "$files/taskfarm" "$root/usr/bin/taskfarm"
install -m 0755 "$files/metasched-run" "$root/usr/bin/metasched-run"
install -D -m 0644 "$files/mpi-pi.c" "$root/usr/local/src/metasched/mpi-pi.c"
chroot "$root" mpicc -O2 -o /usr/local/bin/mpi-pi /usr/local/src/metasched/mpi-pi.c -lm
install -m 0644 "$files/90-metasched.cfg" "$root/etc/cloud/cloud.cfg.d/90-metasched.cfg"

# Python's compiled modules are checked by their sources' times, not by
# hashing each source at every import (what SOURCE_DATE_EPOCH made the
# packages' scripts write): under an emulated CPU, cloud-init's stages
# took twice as long. The sources' times are the packages', so this is as
# reproducible.
chroot "$root" env -u SOURCE_DATE_EPOCH python3 - <<'PY'
import os, py_compile
for base in ("/usr/lib/python3", "/usr/lib/python3.11"):
    for d, _, files in os.walk(base):
        if os.path.basename(d) != "__pycache__":
            continue
        for f in files:
            src = os.path.join(os.path.dirname(d), f.split(".")[0] + ".py")
            if f.endswith(".pyc") and os.path.exists(src):
                py_compile.compile(src, cfile=os.path.join(d, f), quiet=1,
                                   invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
PY

# The root file system is the VM's disk, as a whole (no partition table).
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' >"$root/etc/fstab"

# Each VM gets its own: cloud-init makes the host keys and sets the host
# name at the first boot, systemd the machine ID.
rm -f "$root"/etc/ssh/ssh_host_*
rm -f "$root/etc/hostname" "$root/etc/resolv.conf" "$root/var/lib/dbus/machine-id"
: >"$root/etc/machine-id"
rm -f "$root/var/cache/ldconfig/aux-cache" "$root/var/log/alternatives.log" "$root/var/log/bootstrap.log"
rm -rf "$root"/var/log/journal/*

# Nothing periodic competes with the jobs.
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer >/dev/null 2>&1
