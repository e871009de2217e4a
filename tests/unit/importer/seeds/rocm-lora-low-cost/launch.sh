export HIP_VISIBLE_DEVICES=0
export PYTORCH_HIP_ALLOC_CONF=malloc_async:true
llama-cli train \
    --stage sft \
    --do_train \
    --model_name_or_path Qwen/Qwen2.5-7B-Instruct \
    --dataset train_data \
    --template qwen \
    --finetuning_type lora \
    --lora_target q_proj,v_proj \
    --output_dir ./saves/qwen25-lora-rocm \
    --overwrite_cache \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 4 \
    --learning_rate 1e-4 \
    --num_train_epochs 3.0 \
    --lr_scheduler_type cosine \
    --warmup_ratio 0.1 \
    --bf16 \
    --logging_steps 10 \
    --save_steps 100 \
    --plot_loss \
    --gpu_ids 0
