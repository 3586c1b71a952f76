# A script's training loop keeps every step's outputs in a module global, read when the run
# ends: it holds the whole run's outputs until then.
import numpy as np
import torch

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.rand(4, 8), torch.rand(4, 1)) for _ in range(10)]

outputs = []
for x, y in loader:
    out = model(x)
    loss = torch.nn.functional.mse_loss(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    outputs.append(out.detach().cpu().numpy())  # expect: LS014

print(np.concatenate(outputs).mean())
