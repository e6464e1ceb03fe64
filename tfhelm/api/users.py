"""Users' workspaces (`tfhelm user`), for cluster admins: the clients made here, the rules
and actions are tfhelm.workspace's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from tfhelm.api.edge import raises_api_errors

if TYPE_CHECKING:
    from tfhelm.workspace.actions import Urls, UserRow
    from tfhelm.workspace.userspec import UserOptions

Notify = Callable[[str], None]


@raises_api_errors
def render(opts: UserOptions) -> str:
    """The workspace's manifests and the cluster-wide policies, as YAML (a dry run)."""
    from tfhelm.cluster import deploy
    from tfhelm.helm import Helm
    from tfhelm.workspace import actions, userspec

    queued = opts.queue or opts.queue_asked()
    policies = (userspec.priority_policy() if queued else []) + userspec.cluster_policies()
    return deploy.manifests_yaml({userspec.RELEASE: actions.render(opts, Helm()),
                                  "cluster-wide policies (applied once)": policies})


@raises_api_errors
def add(opts: UserOptions, notify: Notify = lambda _: None) -> None:
    """Create or update a user's namespace, login token and workspace."""
    from tfhelm.helm import Helm
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions

    actions.add(opts, Helm(), Kube(), notify=notify)


@raises_api_errors
def wait_ready(user: str, timeout: float, waiting: Notify = lambda _: None) -> dict[str, str]:
    """Wait up to `timeout` seconds for the workspace to start; what is still starting
    (component: reason), each time it changes to `waiting`."""
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions

    return actions.wait_ready(user, Kube(), timeout, waiting)


@raises_api_errors
def urls(user: str) -> Urls:
    """The user's notebook URL with its login token, TensorBoard's and the file server's."""
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions, userspec

    return actions.urls(userspec.validate_user(user), Kube())


@raises_api_errors
def list_users() -> list[UserRow]:
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions

    return actions.list_users(Kube())


@raises_api_errors
def remove(user: str, purge: bool = False, notify: Notify = lambda _: None) -> list[str] | None:
    """Remove a user's workspace and revoke every account and grant in its namespace (the
    login token, ServiceAccounts and their tokens, Roles, RoleBindings; `purge`: the namespace
    with everything in it); None when there was none, else what still runs in the namespace."""
    from tfhelm.kube import Kube
    from tfhelm.workspace import actions, userspec

    kube = Kube()
    if actions.remove(userspec.validate_user(user), kube, purge=purge, notify=notify) is None:
        return None
    return [] if purge else actions.still_running(user, kube)
