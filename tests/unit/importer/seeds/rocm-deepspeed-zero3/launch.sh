export PYTORCH_ROCM_ARCH=gfx942 # 根据实际显卡架构调整，MI300 系列为 gfx942
export HSA_OVERRIDE_GFX_VERSION=9.4.2 # 防止版本识别错误
export NCCL_DEBUG=INFO # RCCL 复用部分 NCCL 调试变量名
export MASTER_ADDR=localhost
export MASTER_PORT=29500
torchrun --nproc_per_node=8 \
    src/train.py \
    --config_file train_lora_rocm.yaml
