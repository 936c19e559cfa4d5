"""TRACE trainer: one LoRA adapter per capability, trained with GRPO on its environment."""
