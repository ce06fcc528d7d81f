#!/usr/bin/env bash
# The Debian package as a fresh Debian 12 machine takes it: its control fields (dpkg-deb -I), its
# dependencies resolvable from the archive (apt-get install --simulate), every library that its
# programs and libraries link against either its own or in a package it depends on, and its contents
# unpacked into a throw-away root (dpkg -x) and used from there: consumer_test.sh against <root>/usr
# (mirra --version, find_package, pkg-config, mirra eval).
#   deb_test.sh PACKAGE.deb SOURCE_DIR WORK_DIR
set -euo pipefail
deb=$(realpath "$1") source=$2 work=$3
here=$(dirname "$(realpath "$0")")
rm -rf "$work" && mkdir -p "$work"

echo "== $(basename "$deb")"
dpkg-deb -I "$deb"
depends=$(dpkg-deb -f "$deb" Depends)
package_names() { tr ',|' '\n\n' | sed 's/(.*)//; s/:any//; s/ //g' | grep -v '^$' || true; }
mapfile -t depended < <(package_names <<< "$depends")
# What a dependency itself requires counts too: libopenblas0 is met by libopenblas0-pthread, which
# holds the library behind the alternatives link libopenblas.so.0.
mapfile -t satisfied < <(printf '%s\n' "${depended[@]}"
  for package in "${depended[@]}"; do dpkg-query -W -f='${Depends}' "$package" 2>/dev/null | package_names; done)

echo "== its dependencies resolve (apt-get install --simulate)"
apt-get install --simulate --no-install-recommends "$deb" > "$work/simulate.txt" || { cat "$work/simulate.txt"; exit 1; }
grep -q "^Inst mirra \|^mirra is already" "$work/simulate.txt" || { cat "$work/simulate.txt"; exit 1; }

echo "== every linked library is the package's own or in a package it depends on"
root="$work/root"
dpkg -x "$deb" "$root"
owner_of() {  # the Debian package that holds a library file (either side of the /usr merge, or behind an alternatives link)
  local path=$1
  dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null || true
}
checked=0
while IFS= read -r file; do
  readelf -h "$file" > /dev/null 2>&1 || continue  # ELF files only
  for needed in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    if find "$root" -name "$needed" | grep -q .; then continue; fi
    path=$(ldconfig -p | awk -v lib="$needed" '$1 == lib && /x86-64/ && !found {print $NF; found = 1}')
    [ -n "$path" ] || { echo "FAIL: ${file#"$root"} needs $needed, which this machine does not have"; exit 1; }
    package=$(owner_of "$path" | sed -n '1s/:.*//p')
    if ! printf '%s\n' "${satisfied[@]}" | grep -qx "$package"; then
      echo "FAIL: ${file#"$root"} needs $needed (from $package), which the package does not depend on"; exit 1
    fi
    checked=$((checked + 1))
  done
done < <(find "$root" -type f \( -path '*/bin/*' -o -name '*.so*' \))
echo "$checked links checked against Depends"

"$here/consumer_test.sh" "$root/usr" "$source" "$work/consumer"
echo "deb_test: PASS"
