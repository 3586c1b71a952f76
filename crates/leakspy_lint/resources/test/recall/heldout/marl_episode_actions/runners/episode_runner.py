"""A multi-agent episode runner (in the style of PyMARL): the controller picks actions with its
agent network, and the runner writes them into the episode batch, which goes to the replay
buffer. The actions were computed with autograd on, so every stored episode keeps the graph that
produced its actions; the logger also keeps every statistic it was ever given.

Source: oxwhirl/pymarl pull request #73, "Fix memory leak": "the `actions` should either be
detached from the computation graph or be converted into a numpy array before being stored into
the replay buffer" (CPU memory grew linearly over 8 M steps), and "the stats should be cleared
periodically" in the Logger. Fix: `actions.detach()`; the logger keeps a bounded window.
"""

from functools import partial

from components.episode_buffer import EpisodeBatch


class EpisodeRunner:
    def __init__(self, args, logger, env, mac, scheme, groups, preprocess):
        self.args = args
        self.logger = logger
        self.env = env
        self.mac = mac
        self.episode_limit = env.episode_limit
        self.new_batch = partial(EpisodeBatch, scheme, groups, 1, self.episode_limit + 1,
                                 preprocess=preprocess, device=args.device)
        self.t_env = 0

    def reset(self):
        self.batch = self.new_batch()
        self.env.reset()
        self.t = 0

    def run(self, test_mode=False):
        self.reset()
        terminated = False
        episode_return = 0
        self.mac.init_hidden(batch_size=1)
        while not terminated:
            pre_transition_data = {
                "state": [self.env.get_state()],
                "avail_actions": [self.env.get_avail_actions()],
                "obs": [self.env.get_obs()],
            }
            self.batch.update(pre_transition_data, ts=self.t)
            actions = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, test_mode=test_mode)
            reward, terminated, env_info = self.env.step(actions[0])
            episode_return += reward
            post_transition_data = {
                "actions": actions,
                "reward": [(reward,)],
                "terminated": [(terminated != env_info.get("episode_limit", False),)],
            }
            self.batch.update(post_transition_data, ts=self.t)  # expect: LS002
            self.t += 1
        if not test_mode:
            self.t_env += self.t
        self.logger.log_stat("return_mean", episode_return, self.t_env)
        return self.batch
