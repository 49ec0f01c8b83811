#!/usr/bin/env bash
# Builds a Debian-like test image from the host's own binaries, without any registry: dash as
# /bin/sh (no built-in grep, unlike busybox ash), GNU grep and coreutils, setsid, setpriv and
# start-stop-daemon, with the shared libraries `ldd` names, on a merged /usr like Debian's.
# Like the Jupyter docker-stacks images, its PATH starts with a directory the tool user
# (student, uid 1000) may write: the security tests drop fake tools there.
# Usage: scripts/build-debian-test-image.sh [IMAGE]  (default jupyter-tool-terminal-test-debian:latest)
set -euo pipefail
image=${1:-jupyter-tool-terminal-test-debian:latest}
tools=(dash grep env sleep cat id kill setsid setpriv start-stop-daemon timeout ls true false
  head chmod sh)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{etc,tmp,root,data,home/student,opt/tool/bin}
for link in bin sbin lib lib64; do ln -s "usr/$link" "$root/$link"; done
chmod 1777 "$root/tmp"
copy() {  # copy a host file to the same path under the merged /usr of the image
  local real
  real=$(readlink -f "$1")
  local target=${1#/usr}
  target=$root/usr${target}
  mkdir -p "$(dirname "$target")"
  [ -e "$target" ] || cp -L "$real" "$target"
}
for tool in "${tools[@]}"; do
  [ "$tool" = sh ] && continue
  path=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin type -P "$tool" || true)
  if [ -z "$path" ]; then
    echo "build-debian-test-image: $tool is needed on the host" >&2
    exit 1
  fi
  copy "$path"
  case "$path" in */sbin/*) dir=sbin ;; *) dir=bin ;; esac
  [ -e "$root/usr/$dir/$tool" ] || cp -L "$path" "$root/usr/$dir/$tool"
  for lib in $(ldd "$path" | grep -o '/[^ ]*'); do copy "$lib"; done
done
ln -sf dash "$root/usr/bin/sh"
cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
student:x:1000:1000:student:/home/student:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
printf 'root:x:0:\nstudent:x:1000:\nnogroup:x:65534:\n' > "$root/etc/group"
chown -R 1000:1000 "$root/home/student" "$root/opt/tool"
tar -C "$root" -c . | docker import -c 'CMD ["/bin/sleep","infinity"]' \
  -c 'ENV PATH=/opt/tool/bin:/usr/local/bin:/usr/bin:/bin' - "$image" >/dev/null
echo "built $image"
