# The loop backpropagates the newest entry of its list of losses: every entry was
# backpropagated in its turn and stays, with its graph (`retain_graph=True` keeps it whole),
# whatever the analysis knows of the loss function passed in.
def fit(params, loss_function, make_optimizer, max_iter=1000):
    optimizer = make_optimizer(params)
    losses = []
    for it in range(max_iter):
        optimizer.zero_grad()
        losses.append(loss_function(*params))  # expect: LS002
        losses[-1].backward(retain_graph=True)
        optimizer.step()
    return [float(l) for l in losses]
