"""The acting wing: fast paths of a gradient-free acting step, beside the model's own code.

The modules of :mod:`txrl.nn` compute what the papers define, for a whole sequence or one
step alike. The paths here compute the same thing faster when a policy acts, and the float64
tests of ``tests/nn/test_protocol.py`` and ``tests/sb3`` hold them equal to it:

* :mod:`txrl.nn.acting.ring`: one step over the memory kept as a ring buffer, eager or
  compiled with ``torch.compile`` (the ``compile_step`` setting), a policy's heads included;
* :mod:`txrl.nn.acting.replica`: column-major copies of the weights for the step's few-row
  products on a CPU, in a replica of the module tree that the wing owns;
* :mod:`txrl.nn.acting.sample`: a sample of the parameters' values, by which ``predict``
  notices writes through ``p.data`` that no version counter records.

The CUDA graph of a rollout's step sits with the learners (:mod:`txrl.sb3.graphs`). The wing
takes the model's weights as they are or derives objects of its own from them, kept in one
attribute of the module that is left out of its copies; it never writes into a module's
parameters, buffers or submodules and relies on no private torch function, so a step stays
correct with two threads acting, a parametrized or pruned linear, gradients on and a copy
of the model taken in the middle of a step (``tests/nn/test_acting_steps.py``,
``tests/sb3/test_acting_safety.py``).
"""
