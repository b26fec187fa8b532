"""CPU seconds of 40 SFT-like steps (forward, backward, AdamW) and of sampling, for the default's
model size on one thread. Run it with and without the pins, interleaved, to price them:

    for i in 1 2 3; do
      GRPO_CPU_NUMERICS=native python notes/cpu_probe/speed_step.py
      ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE python notes/cpu_probe/speed_step.py
    done
"""

import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.set_num_threads(1)
torch.manual_seed(0)
config = GPT2Config(vocab_size=20, n_positions=32, n_embd=128, n_layer=2, n_head=4)
model = GPT2LMHeadModel(config)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 20, (128, 24))


def step() -> None:
    model(ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()


for _ in range(3):
    step()
start = time.process_time()
for _ in range(40):
    step()
sft = time.process_time() - start
start = time.process_time()
with torch.no_grad():
    for _ in range(5):
        model.generate(ids[:32, :8], max_new_tokens=12, do_sample=True, top_k=0, pad_token_id=0)
gen = time.process_time() - start
print(f"sft_cpu_s={sft:.2f} gen_cpu_s={gen:.2f}")
