#!/bin/sh
# /init of the metasched guest image (docs/internals/images.md, "The init"),
# kernel {{.Release}}. It runs as PID 1 and never exits.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# On a disk image's root file system ({{.OnDisk}} is there) this init runs
# again after the switch from the initramfs: /proc, /sys, /dev and /run
# were moved here, the modules are loaded, and it does not switch again.
on_disk=
[ -e {{.OnDisk}} ] && on_disk=1
if [ -z "$on_disk" ]; then
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
fi
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
exec </dev/console >/dev/console 2>&1
if [ -n "$on_disk" ]; then
	echo "metasched-init: root file system $(awk '$2 == "/" { d = $1 } END { print d }' /proc/mounts), kernel $(uname -r)"
else
	echo "metasched-init: kernel $(uname -r)"
fi

# Modules, in dependency order (those built into the kernel are left out).
if [ -z "$on_disk" ]; then
	for m in{{range .Modules}} {{.}}{{end}}; do
		insmod "/lib/modules/{{.Release}}/$m" || echo "metasched-init: insmod $m failed"
	done
fi

. /lib/metasched/cmdline.sh
read_cmdline /proc/cmdline

# A disk image's root file system: mount it, move the mounts into it and
# switch to it, where this init runs again. A root that cannot be mounted
# stops the boot (the guest agent never answers, the console says why).
if [ -n "$ms_root" ] && [ -z "$on_disk" ]; then
	n=0
	while [ ! -b "$ms_root" ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	mkdir -p /newroot
	if mount -t ext4 "$ms_root" /newroot && [ -x /newroot/init ] && [ -e /newroot{{.OnDisk}} ]; then
		umount /tmp
		for d in proc sys dev run; do
			mount --move "/$d" "/newroot/$d"
		done
		echo "metasched-init: switching to the root file system on $ms_root"
		exec switch_root /newroot /init
	fi
	echo "metasched-init: no metasched root file system on $ms_root: the boot stops here"
	while :; do sleep 3600; done
fi

if [ -n "$ms_hostname" ]; then
	hostname "$ms_hostname"
	echo "$ms_hostname" >/etc/hostname
fi
write_hosts /etc/hosts

ip link set lo up
if [ -n "$ms_ip" ]; then
	n=0
	while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if ip link set eth0 up && ip addr add "$ms_ip" dev eth0; then
		echo "metasched-init: eth0 $ms_ip"
		if [ -n "$ms_gw" ]; then
			ip route add default via "$ms_gw" || echo "metasched-init: no route via $ms_gw"
		fi
	else
		echo "metasched-init: eth0 could not be configured"
	fi
fi

# The guest agent's port: the virtio serial port named {{.AgentPort}}
# (there is no udev to make /dev/virtio-ports/ links).
port=
n=0
while [ -z "$port" ] && [ $n -lt 100 ]; do
	for p in /sys/class/virtio-ports/*; do
		if [ "$(cat "$p/name" 2>/dev/null)" = {{.AgentPort}} ] && [ -c "/dev/${p##*/}" ]; then
			port=/dev/${p##*/}
		fi
	done
	[ -n "$port" ] || sleep 0.1
	n=$((n + 1))
done
if [ -z "$port" ]; then
	echo "metasched-init: no virtio port named {{.AgentPort}}: no guest agent"
	while :; do sleep 3600; done
fi
echo "metasched-init: guest agent on $port"
while :; do
	qemu-ga -m virtio-serial -p "$port" -t /run -f /run/qemu-ga.pid
	echo "metasched-init: qemu-ga exited ($?), restarted in 1 s"
	sleep 1
done
