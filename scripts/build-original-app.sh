#!/usr/bin/env bash
# Builds the original Waggle OS web app (marolinik/waggle-os, apps/web) from
# its source into the browser test's fixture
# (services/waggle/e2e/originalapp/testdata), so anyone can rebuild what is
# committed there and check it against testdata/SHA256SUMS.
#
#   scripts/build-original-app.sh /path/to/waggle-os [OUT]
#
# /path/to/waggle-os is a git clone of https://github.com/marolinik/waggle-os
# holding commit $COMMIT (only apps/web, packages/shared and the package.json
# files are read, from that commit, not from the work tree). OUT defaults to
# services/waggle/e2e/originalapp/testdata; OUT/app is replaced.
#
# Needs node >= 20 and npm (the npm registry). Recorded build: node v20.20.2,
# npm 11.19.1, linux x64.
#
# Why not the original's own lockfile: it was written on Windows and lists
# win32-only binaries (@swc/core-win32-x64-msvc, @rolldown/binding-win32-x64-msvc)
# as direct dependencies of the repository root, so `npm ci` refuses it on
# Linux (EBADPLATFORM), and it lacks the Linux builds of rollup, esbuild and
# swc. scripts/original-app/ holds a root package.json naming only the two
# workspaces the web app needs and a lockfile resolved from their
# package.json ranges (2026-12-03); `npm ci` installs exactly that.
#
# What differs from the plain `vite build` output: images larger than
# 256 KiB (the wallpapers and persona portraits, 8.9 of the 11.5 MB) are
# replaced by a 1x1 image of the same format and name, to keep the fixture
# small; the JavaScript, CSS and HTML are byte for byte the build's.
set -euo pipefail

COMMIT=b48b9ba157693a4eb71a74b684fb8ff453c88e05
REPO=https://github.com/marolinik/waggle-os
MAX_IMAGE=262144

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
src=${1:?usage: $0 /path/to/waggle-os [OUT]}
out=${2:-$root/services/waggle/e2e/originalapp/testdata}

command -v node >/dev/null || { echo "node is required (>= 20)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is required" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "node >= 20 is required, found $(node --version)" >&2
  exit 1
fi
if ! git -C "$src" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
  echo "$src is not a git clone of $REPO holding $COMMIT" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The sources at the pinned commit (git archive with paths reads only
# those blobs, so a partial clone missing unrelated large files works).
git -C "$src" archive "$COMMIT" -- apps/web packages/shared tsconfig.base.json | tar -x -C "$work"
cp "$here/original-app/package.json" "$here/original-app/package-lock.json" "$work/"

cd "$work"
# Scripts are not run: the web app's build needs none, and install scripts
# of a third-party tree have no business running here.
npm ci --ignore-scripts --no-audit --no-fund
# A clean environment for the build: a VITE_* variable (VITE_POSTHOG_KEY,
# for one) would be baked into the bundle.
clean_env=(env -i "PATH=$PATH" "HOME=$work" NODE_ENV=production)
(cd packages/shared && "${clean_env[@]}" npx --no-install tsc)
(cd apps/web && "${clean_env[@]}" npx --no-install vite build)

dist=$work/apps/web/dist
# 1x1 #1a1a1a images (Chromium's canvas encoders).
jpeg=/9j/4AAQSkZJRgABAQAAAQABAAD/4gHYSUNDX1BST0ZJTEUAAQEAAAHIAAAAAAQwAABtbnRyUkdCIFhZWiAH4AABAAEAAAAAAABhY3NwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAA9tYAAQAAAADTLQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAlkZXNjAAAA8AAAACRyWFlaAAABFAAAABRnWFlaAAABKAAAABRiWFlaAAABPAAAABR3dHB0AAABUAAAABRyVFJDAAABZAAAAChnVFJDAAABZAAAAChiVFJDAAABZAAAAChjcHJ0AAABjAAAADxtbHVjAAAAAAAAAAEAAAAMZW5VUwAAAAgAAAAcAHMAUgBHAEJYWVogAAAAAAAAb6IAADj1AAADkFhZWiAAAAAAAABimQAAt4UAABjaWFlaIAAAAAAAACSgAAAPhAAAts9YWVogAAAAAAAA9tYAAQAAAADTLXBhcmEAAAAAAAQAAAACZmYAAPKnAAANWQAAE9AAAApbAAAAAAAAAABtbHVjAAAAAAAAAAEAAAAMZW5VUwAAACAAAAAcAEcAbwBvAGcAbABlACAASQBuAGMALgAgADIAMAAxADb/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wAARCAABAAEDASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAAAAn/xAAUEAEAAAAAAAAAAAAAAAAAAAAA/8QAFAEBAAAAAAAAAAAAAAAAAAAAAP/EABQRAQAAAAAAAAAAAAAAAAAAAAD/2gAMAwEAAhEDEQA/AJ3gA//Z
png=iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4AWKSkpL6DwAAAP//8vvG2AAAAAZJREFUAwAB+AFQx3lO1gAAAABJRU5ErkJggg==
replaced=()
while IFS= read -r -d '' f; do
  case "$f" in
    *.jpg | *.jpeg) echo "$jpeg" | base64 -d >"$f" ;;
    *.png) echo "$png" | base64 -d >"$f" ;;
    *.js | *.css | *.html) continue ;;
    *) echo "unexpected large file in the build: ${f#"$dist"/}" >&2; exit 1 ;;
  esac
  replaced+=("${f#"$dist"/}")
done < <(find "$dist" -type f -size +"$MAX_IMAGE"c -print0 | sort -z)

# The notices of the bundled packages (the web app's production
# dependency tree), as their MIT/ISC/Apache licenses ask.
notices=$work/THIRD-PARTY-NOTICES
npm ls --omit=dev --all --parseable --workspace apps/web | node -e '
const fs = require("fs"), path = require("path");
const dirs = [...new Set(fs.readFileSync(0, "utf8").split("\n").filter(Boolean))].sort();
const out = ["Notices of the third-party packages bundled in app/ (the production dependency tree of @waggle/web).", ""];
for (const dir of dirs) {
  let pkg;
  try { pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")); } catch { continue; }
  if (!pkg.name || pkg.name.startsWith("@waggle/") || pkg.name === "waggle-os") continue;
  const files = fs.readdirSync(dir).filter(f => /^(licen[cs]e|copying|notice)/i.test(f)).sort();
  out.push("=".repeat(72), `${pkg.name}@${pkg.version} (${typeof pkg.license === "string" ? pkg.license : JSON.stringify(pkg.license)})`, "");
  for (const f of files) out.push(fs.readFileSync(path.join(dir, f), "utf8").trim(), "");
  if (!files.length) out.push("(no license file in the package; its package.json states the license above)", "");
}
fs.writeFileSync(process.argv[1], out.join("\n"));
' "$notices"

versions=$(npm ls --depth=0 --workspace apps/web vite react typescript @vitejs/plugin-react-swc tailwindcss 2>/dev/null | sed -n 's/.*── //p' | sort -u | tr '\n' ' ')

rm -rf "$out/app"
mkdir -p "$out"
cp -r "$dist" "$out/app"
cp "$notices" "$out/THIRD-PARTY-NOTICES"
# The source carries no LICENSE file: its README's "License" section and
# its package.json say MIT (author Marko Markovic); this is that license.
cat >"$out/LICENSE" <<'LICENSE_EOF'
The original Waggle OS web app (app/) is distributed under the MIT License,
as stated by its source (https://github.com/marolinik/waggle-os, README.md
"License: MIT" and package.json "license": "MIT", author Marko Markovic).
The third-party packages bundled in it are under their own licenses: see
THIRD-PARTY-NOTICES.

MIT License

Copyright (c) Marko Markovic

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
LICENSE_EOF
(cd "$out" && find app -type f -print0 | sort -z | xargs -0 sha256sum >SHA256SUMS)

{
  echo "The original Waggle OS web app, built from its source."
  echo
  echo "Source:      $REPO"
  echo "Commit:      $COMMIT"
  echo "Paths read:  apps/web, packages/shared, tsconfig.base.json"
  echo "Built:       $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -sm), node $(node --version), npm $(npm --version)"
  echo "Packages:    $versions"
  echo "Lockfile:    scripts/original-app/package-lock.json (the original's is Windows-only; see the script)"
  echo "Command:     scripts/build-original-app.sh <clone of the source>"
  echo "             = npm ci --ignore-scripts; (packages/shared) tsc; (apps/web) vite build"
  echo "             in a clean environment (no VITE_* variables: no analytics key baked in)"
  echo "License:     MIT (the source's README and package.json; see LICENSE)"
  echo "Third party: THIRD-PARTY-NOTICES"
  echo "Checksums:   SHA256SUMS (every file of app/)"
  echo
  echo "Changed after the build: images over $MAX_IMAGE bytes replaced by a 1x1 image"
  echo "of the same format, to keep the fixture small:"
  for f in "${replaced[@]}"; do echo "  app/$f"; done
} >"$out/PROVENANCE"

echo "built into $out/app ($(du -sh "$out/app" | cut -f1))"
