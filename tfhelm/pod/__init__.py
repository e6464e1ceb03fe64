"""The programs the charts run in pods, with the standard library alone (stock TensorFlow and
TensorBoard images have no tfhelm): the task launcher (`launcher`), `helm test`'s check
(`helmtest`), TensorBoard's login proxy (`authproxy`), the HTTP server they and the in-cluster
reaper share (`httpd`), and the pods' door to the API server (`apiserver`).

`make chart-files` (hack/chart-files.py) writes what each program imports - these modules,
tfhelm.contract, tfhelm.reaper's rules and loop - into the charts without docstrings and
comments, one file per module named after it (`tfhelm.pod.launcher.py`), beside a small
entry file that imports them (`launcher.py`, run as `python3 /etc/tfhelm/launcher.py`); the
charts mount them from a ConfigMap. So a module here imports only the standard library and
other such modules (tests/unit/test_imports.py holds that), and tfhelm's CLI imports from
here only what it needs.
"""
