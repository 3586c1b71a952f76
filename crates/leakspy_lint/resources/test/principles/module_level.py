# The same script keeping every step's output with its graph for the whole run.
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randn(8, 4) for _ in range(10)]
all_outputs = []

for epoch in range(5):
    for x in loader:
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        all_outputs.append(out)  # expect: LS002
