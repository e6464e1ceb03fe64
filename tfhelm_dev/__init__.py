"""The development cluster beside the product: a real control plane, real nodes and kwok
nodes on this machine, built from Go modules into the checkout's bin/ (`make testenv node
images`). `tfhelm cluster`, the tests and the benches use it; it is not in the wheel, since
it works only inside a checkout. `make install` puts the checkout on the venv's path.
"""
