"""The built-in broker: a pure-Python Flux-compatible broker on pyzmq.

Modules (one job each): bootstrap (the [bootstrap] TOML), curve_cert (zcert keys), topology (tree shape),
attributes (-S options), protocol (messages), loop (poll reactor), overlay (CURVE sockets), membership
(up/down/lost, quorum), resources (usable cores/memory, R), service (RPC registry), broker (the process),
client (Handle for FLUX_URI), testsize (`flux start --test-size`), cli (the `flux` command), testing (test helpers).

Extending a broker (e.g. the job manager) goes through BrokerOptions.modules: each module is called with the
Broker before it runs and may use Broker.register / rpc / publish / subscribe / on_online.
"""
