#!/usr/bin/env bash
# Builds the Docker image the tests and the demo use, without any registry: busybox (and bash,
# if bash-static is installed) with applet links, a minimal /etc/passwd, imported with
# `docker import` (or `$CONTAINER_CLI import`: CONTAINER_CLI="podman --url unix:///run/podman-test.sock"
# imports it into Podman). Usage: scripts/build-test-image.sh [IMAGE]  (default jupyter-tool-terminal-test:latest)
set -euo pipefail
image=${1:-jupyter-tool-terminal-test:latest}
busybox=$(command -v busybox || true)
[ -x /bin/busybox ] && busybox=/bin/busybox
if [ -z "$busybox" ]; then
  echo "build-test-image: busybox is needed (Debian: apt-get install busybox-static)" >&2
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc,tmp,root,data,home/student}
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
if [ -x /bin/bash-static ]; then cp /bin/bash-static "$root/bin/bash"; fi
cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
student:x:1000:1000:student:/home/student:/bin/sh
nobody:x:65534:65534:nobody:/:/bin/sh
PASSWD
printf 'root:x:0:\nstudent:x:1000:\nnogroup:x:65534:\n' > "$root/etc/group"
chown -R 1000:1000 "$root/home/student"
tar -C "$root" -c . | ${CONTAINER_CLI:-docker} import -c 'CMD ["/bin/sleep","infinity"]' -c 'ENV PATH=/bin' - "$image" >/dev/null
echo "built $image"
