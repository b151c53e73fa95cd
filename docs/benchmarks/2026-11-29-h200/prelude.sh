# Sourced by run.sh and run2.sh, from the repository root: the time left (BUDGET_S from now), and what the
# transfers left in /root/g unpacked there (ONNX Runtime's CUDA build, its exports applied, and `jig`); a later
# call on the same machine finds them unpacked and only applies the exports.
G=/root/g; OUT=${OUT:-/root/out}; mkdir -p "$OUT"; repo=$PWD
deadline=$(($(date +%s) + BUDGET_S))
left() { echo $((deadline - $(date +%s))); }
say() { echo "== $* $(date +%T), $(left) s left"; }
cd "$G" || exit 1
if [ -x jig ] && [ -e pkg/onnxruntime/capi/libonnxruntime_providers_cuda.so ]; then
    say unpacked already
    sp=/opt/torch/.venv/lib/python3.12/site-packages  # as gpu-carry's unpack.sh says it
    export LD_LIBRARY_PATH=$sp/nvidia/cu13/lib:$sp/nvidia/cudnn/lib:$G/pkg/onnxruntime/capi \
        JIG_ORT_LIB=$G/pkg/onnxruntime/capi/libonnxruntime.so.1.31.1 PYTHONPATH=$G/pkg
else
    say unpack
    cat blob.? | tar xf - || { echo "unpack: the blob's pieces do not make a tar"; ls -la "$G"; exit 1; }
    exports=$(bash "$G/unpack.sh") || { echo "unpack.sh failed"; exit 1; }
    eval "$exports"
    xz -dc -T0 jig.xz >jig && chmod +x jig || exit 1
fi
cd "$repo" || exit 1
