"""The multi-agent controller: one shared recurrent agent network picks every agent's action."""

import torch
import torch.nn as nn


class RNNAgent(nn.Module):
    def __init__(self, input_shape, n_actions, hidden_dim=64):
        super().__init__()
        self.fc1 = nn.Linear(input_shape, hidden_dim)
        self.rnn = nn.GRUCell(hidden_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, n_actions)

    def forward(self, inputs, hidden_state):
        h = self.rnn(torch.relu(self.fc1(inputs)), hidden_state)
        return self.fc2(h), h


class BasicMAC:
    def __init__(self, scheme, args):
        self.n_agents = args.n_agents
        self.agent = RNNAgent(scheme["obs"]["vshape"], args.n_actions)
        self.hidden_states = None

    def init_hidden(self, batch_size):
        self.hidden_states = torch.zeros(batch_size * self.n_agents, 64)

    def select_actions(self, ep_batch, t_ep, t_env, test_mode=False):
        avail_actions = ep_batch["avail_actions"][:, t_ep]
        agent_outs = self.forward(ep_batch, t_ep)
        agent_outs[avail_actions == 0] = -1e10
        probs = torch.softmax(agent_outs, dim=-1)
        if test_mode:
            return probs.argmax(dim=-1)
        return probs + (torch.distributions.Categorical(probs).sample().unsqueeze(-1) - probs)

    def forward(self, ep_batch, t):
        inputs = ep_batch["obs"][:, t].reshape(ep_batch.batch_size * self.n_agents, -1)
        agent_outs, self.hidden_states = self.agent(inputs, self.hidden_states)
        return agent_outs.view(ep_batch.batch_size, self.n_agents, -1)
