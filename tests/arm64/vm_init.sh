#!/bin/busybox sh
# /init of the arm64 test machine (tests/arm64/vm.sh builds the initramfs): mounts the
# kernel's file systems, runs /vm_tests.sh in the mode given on the kernel command line
# (canopy.mode=test|bench) and powers off. Everything goes to the console (ttyAMA0),
# which vm.sh reads; "VMINFO booted" tells it the machine came up.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
echo 1 >/proc/sys/kernel/printk
mode=test
for a in $(cat /proc/cmdline); do
    case $a in canopy.mode=*) mode=${a#canopy.mode=} ;; esac
done
echo "VMINFO booted $(uname -m) $(uname -r) in $(cut -d' ' -f1 /proc/uptime)s; mode $mode"
sh /vm_tests.sh "$mode" </dev/null 2>&1
echo "VMINFO done at $(cut -d' ' -f1 /proc/uptime)s"
sync
poweroff -f
