#!/bin/sh
# Makes the Kubernetes Secrets of the StatefulSet: secrets/secrets.yaml (or
# $SECRETS_DIR/secrets.yaml), which kustomization.yaml includes, with
#   Secret shardkeeper-tls   ca.pem, and shardkeeper-N.pem / shardkeeper-N-key.pem per pod
#   Secret shardkeeper-keys  gossip.key (gossip encryption), admin.token (admin endpoints)
# The material itself is kept next to it (ca-key.pem never goes into a Secret). Files that
# exist are kept, so running it again with a larger REPLICAS only adds certificates; the
# manifest is written anew each time.
#
# Environment: REPLICAS (default 3, the StatefulSet's replicas), NAMESPACE (default
# "default"; only for the DNS names added to the certificates), SECRETS_DIR.
# The shardkeeper binary is $SHARDKEEPER_BIN, else the repository's bin/shardkeeper (make
# build), else shardkeeper on PATH, else the image $SHARDKEEPER_IMAGE (default
# shardkeeper:local, built from the repository's Dockerfile when missing) through docker run.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${SECRETS_DIR:-$here/secrets}
replicas=${REPLICAS:-3}
ns=${NAMESPACE:-default}
name=shardkeeper # the StatefulSet and its headless Service

umask 077
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

if [ -n "${SHARDKEEPER_BIN:-}" ]; then
  sk() { "$SHARDKEEPER_BIN" "$@"; }
elif [ -x "$repo/bin/shardkeeper" ]; then
  sk() { "$repo/bin/shardkeeper" "$@"; }
elif command -v shardkeeper >/dev/null 2>&1; then
  sk() { shardkeeper "$@"; }
else
  image=${SHARDKEEPER_IMAGE:-shardkeeper:local}
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    docker build -t "$image" "$repo"
  fi
  sk() { docker run --rm --user "$(id -u):$(id -g)" -v "$dir:$dir" -w "$dir" "$image" "$@"; }
fi

[ -f "$dir/ca.pem" ] || sk tls ca --dir "$dir" >/dev/null
i=0
while [ "$i" -lt "$replicas" ]; do
  pod=$name-$i
  [ -f "$dir/$pod.pem" ] || sk tls node --dir "$dir" --name "$pod" \
    --hosts "$pod.$name,$pod.$name.$ns.svc,$pod.$name.$ns.svc.cluster.local" >/dev/null
  i=$((i + 1))
done
[ -s "$dir/gossip.key" ] || sk gossip-key generate > "$dir/gossip.key"
# Any 32 random bytes make a token; the gossip key generator gives them in base64.
[ -s "$dir/admin.token" ] || sk gossip-key generate > "$dir/admin.token"

# entry KEY FILE: one stringData entry, the file as a literal block.
entry() {
  printf '  %s: |\n' "$1"
  sed 's/^/    /' "$2"
}

out=$dir/secrets.yaml
{
  echo "# Made by deploy/k8s/make-secrets.sh: keep it out of version control."
  echo "apiVersion: v1"
  echo "kind: Secret"
  echo "metadata:"
  echo "  name: $name-tls"
  echo "  labels:"
  echo "    app.kubernetes.io/name: $name"
  echo "type: Opaque"
  echo "stringData:"
  entry ca.pem "$dir/ca.pem"
  i=0
  while [ "$i" -lt "$replicas" ]; do
    entry "$name-$i.pem" "$dir/$name-$i.pem"
    entry "$name-$i-key.pem" "$dir/$name-$i-key.pem"
    i=$((i + 1))
  done
  echo "---"
  echo "apiVersion: v1"
  echo "kind: Secret"
  echo "metadata:"
  echo "  name: $name-keys"
  echo "  labels:"
  echo "    app.kubernetes.io/name: $name"
  echo "type: Opaque"
  echo "stringData:"
  entry gossip.key "$dir/gossip.key"
  entry admin.token "$dir/admin.token"
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out (secrets of $replicas nodes)"
