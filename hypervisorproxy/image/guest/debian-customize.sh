#!/bin/sh
# debian-customize.sh ROOT FILES: mmdebstrap's customize hook of the Debian
# image (docs/internals/images.md, "The Debian image"): metasched's files into
# the tree at ROOT, from the directory FILES, the MPI example built with mpicc,
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

# The root file system is the VM's disk, as a whole (no partition table),
# never checked at boot: every VM's disk is a new overlay of this clean
# file system (the check took 4 s of an emulated CPU).
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 0\n' >"$root/etc/fstab"

# What a VM does not do at boot (docs/internals/images.md, "The Debian image"):
# under an emulated CPU everything a boot runs is paid in seconds, on one
# vCPU shared with cloud-init. The initrd holds only the modules the root
# file system needs (it had most of the kernel's: 15 MiB), no module for
# hardware a VM has not, or cannot use, is loaded, and the journal stays
# in memory.
printf 'MODULES=list\nCOMPRESS=gzip\n' >"$root/etc/initramfs-tools/conf.d/metasched.conf"
printf 'virtio_pci\nvirtio_blk\n' >>"$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all >/dev/null
for m in kvm kvm_amd kvm_intel ata_piix ata_generic pata_acpi powernow_k8 acpi_cpufreq floppy pcspkr serio_raw; do
	echo "blacklist $m"
done >"$root/etc/modprobe.d/metasched.conf"
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"$root/etc/systemd/journald.conf.d/metasched.conf"

# Each VM gets its own: cloud-init makes the host keys and sets the host
# name at the first boot, systemd the machine ID.
rm -f "$root"/etc/ssh/ssh_host_*
rm -f "$root/etc/hostname" "$root/etc/resolv.conf" "$root/var/lib/dbus/machine-id"
: >"$root/etc/machine-id"
rm -f "$root/var/cache/ldconfig/aux-cache" "$root/var/log/alternatives.log" "$root/var/log/bootstrap.log"
rm -rf "$root"/var/log/journal/*

# Nothing periodic competes with the jobs, and no unit runs that a VM of
# a job has no use for: logins on terminals (nobody has a password),
# binfmt, fuse, debug and config file systems, huge pages, hot-plug, the
# journal's flush to disk. cloud-init's config stage is not run either:
# its one module (runcmd) runs in the final stage (90-metasched.cfg), and
# each stage is a Python process that takes seconds to start there.
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
	dpkg-db-backup.timer systemd-tmpfiles-clean.timer \
	getty@.service serial-getty@.service getty-static.service \
	systemd-binfmt.service proc-sys-fs-binfmt_misc.automount sys-fs-fuse-connections.mount \
	sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount dev-hugepages.mount \
	modprobe@fuse.service modprobe@loop.service modprobe@dm_mod.service modprobe@efi_pstore.service modprobe@configfs.service \
	systemd-journal-flush.service cloud-init-hotplugd.socket cloud-config.service >/dev/null 2>&1
