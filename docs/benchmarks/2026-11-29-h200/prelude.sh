# Sourced by run.sh and run2.sh, from the repository root: the time left (BUDGET_S from now), and what the
# transfers left in /root/g unpacked there (ONNX Runtime's CUDA build, its exports applied, and `jig`).
G=/root/g; OUT=${OUT:-/root/out}; mkdir -p "$OUT"; repo=$PWD
deadline=$(($(date +%s) + BUDGET_S))
left() { echo $((deadline - $(date +%s))); }
say() { echo "== $* $(date +%T), $(left) s left"; }
say unpack
cd "$G" || exit 1
cat blob.? | tar xf - || { echo "unpack: the blob's pieces do not make a tar"; ls -la "$G"; exit 1; }
exports=$(bash "$G/unpack.sh") || { echo "unpack.sh failed"; exit 1; }
eval "$exports"
xz -dc -T0 jig.xz >jig && chmod +x jig || exit 1
cd "$repo" || exit 1
