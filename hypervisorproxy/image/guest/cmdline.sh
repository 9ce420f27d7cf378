# The metasched keys of the kernel command line, read by /init of the
# metasched guest image (docs/internals/images.md, "The kernel command
# line"). Sourced by
# /init; a file of its own so that it can be tested on the build host.

# read_cmdline FILE sets ms_hostname, ms_ip, ms_gw, ms_hosts and ms_root from the
# metasched.* words of FILE (/proc/cmdline). Unknown metasched keys are
# reported and ignored.
read_cmdline() {
	ms_hostname= ms_ip= ms_gw= ms_hosts= ms_root=
	set -f
	for arg in $(cat "$1"); do
		case "$arg" in
		metasched.hostname=*) ms_hostname=${arg#*=} ;;
		metasched.ip=*) ms_ip=${arg#*=} ;;
		metasched.gw=*) ms_gw=${arg#*=} ;;
		metasched.hosts=*) ms_hosts=${arg#*=} ;;
		metasched.root=*) ms_root=${arg#*=} ;;
		metasched.*) echo "metasched-init: unknown key ${arg%%=*} ignored" ;;
		esac
	done
	set +f
}

# write_hosts FILE writes the hosts file: localhost, the guest's own name
# (at its address, or 127.0.1.1 without one), then the metasched.hosts
# entries (name=addr, comma-separated) as "addr name" lines.
write_hosts() {
	{
		echo "127.0.0.1 localhost"
		if [ -n "$ms_hostname" ]; then
			if [ -n "$ms_ip" ]; then
				echo "${ms_ip%/*} $ms_hostname"
			else
				echo "127.0.1.1 $ms_hostname"
			fi
		fi
		set -f
		old_ifs=$IFS
		IFS=,
		for entry in $ms_hosts; do
			echo "${entry#*=} ${entry%%=*}"
		done
		IFS=$old_ifs
		set +f
	} >"$1"
}
