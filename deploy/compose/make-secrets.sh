#!/bin/sh
# Makes the secrets of the Compose cluster in ./secrets (or $SECRETS_DIR):
#   ca.pem, ca-key.pem        the cluster CA (ca-key.pem never leaves this directory)
#   n1.pem, n1-key.pem, ...   each node's certificate (SAN URI spiffe://shardkeeper/node/nN)
#   gossip.key                the gossip encryption key
#   admin.token               the admin token (gossip key rotation)
# Files that exist are kept, so running it again only adds what is missing.
#
# The shardkeeper binary is $SHARDKEEPER_BIN, else the repository's bin/shardkeeper (make
# build), else shardkeeper on PATH, else the image $SHARDKEEPER_IMAGE (default
# shardkeeper:local, built from the repository's Dockerfile when missing) through docker run.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${SECRETS_DIR:-$here/secrets}
nodes="n1 n2 n3"
# Each node's address on the compose network, added to its certificate for tools that
# check host names (the node itself identifies peers by the SAN URI only).
ip_n1=172.28.0.11 ip_n2=172.28.0.12 ip_n3=172.28.0.13

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
  # As the caller's uid, with the directory at the same path, so that the files are the
  # caller's and --dir names them.
  sk() { docker run --rm --user "$(id -u):$(id -g)" -v "$dir:$dir" -w "$dir" "$image" "$@"; }
fi

[ -f "$dir/ca.pem" ] || sk tls ca --dir "$dir" >/dev/null
for n in $nodes; do
  eval "ip=\$ip_$n"
  [ -f "$dir/$n.pem" ] || sk tls node --dir "$dir" --name "$n" --hosts "$n,$ip" >/dev/null
done
[ -s "$dir/gossip.key" ] || sk gossip-key generate > "$dir/gossip.key"
# Any 32 random bytes make a token; the gossip key generator gives them in base64.
[ -s "$dir/admin.token" ] || sk gossip-key generate > "$dir/admin.token"
chmod 0600 "$dir"/*-key.pem "$dir/gossip.key" "$dir/admin.token"
echo "secrets in $dir"
