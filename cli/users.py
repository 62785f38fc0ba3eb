"""``elanus user ...`` and ``elanus role ...``: Milvus's RBAC from the command line.

Passwords are never taken from an argument (ps shows those): ``--new-password`` reads
``$ELANUS_NEW_PASSWORD`` or prompts (or reads a line of stdin in scripts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import RenderableType

from elanus.cli.admin import YesOpt, _confirm, _done
from elanus.cli.context import JsonOpt, UriOpt, option, run_action
from elanus.cli.output import kv_table, table
from elanus.ops.replies import RoleDescription, UserDescription, WhoAmI

if TYPE_CHECKING:
    from elanus.client.client import Client

user_app = typer.Typer(
    help="Users: create, drop, list, describe, change passwords, bind roles.",
    no_args_is_help=True,
)
role_app = typer.Typer(
    help="Roles: create, drop, list, describe, grant and revoke privileges.",
    no_args_is_help=True,
)

UserArg = Annotated[str, typer.Argument(help="User name.", show_default=False)]
RoleArg = Annotated[str, typer.Argument(help="Role name.", show_default=False)]
NewPasswordOpt = Annotated[
    str,
    typer.Option(
        "--new-password",
        envvar="ELANUS_NEW_PASSWORD",
        prompt="New password",
        hide_input=True,
        confirmation_prompt=True,
        show_default=False,
        help="The new password ($ELANUS_NEW_PASSWORD, else asked for).",
    ),
]


def _list_command(kind: str, names: Callable[[Client], list[str]]) -> Any:
    """``user list`` and ``role list``: every name of one kind, one a row."""

    def command(ctx: typer.Context, as_json: JsonOpt = False, uri: UriOpt = None) -> None:
        run_action(
            ctx, names, lambda found: table([kind], [(n,) for n in found]), as_json=as_json, uri=uri
        )

    command.__doc__ = f"Every {kind} name."
    return command


# -- users ------------------------------------------------------------------------------------
@user_app.command("create")
def create_user(
    ctx: typer.Context,
    name: UserArg,
    password: NewPasswordOpt,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Create a user (it has the public role's privileges until roles are bound)."""
    run_action(
        ctx,
        lambda c: c.create_user(name, password),
        _done(f"user {name} created"),
        as_json=as_json,
        uri=uri,
    )


@user_app.command("drop")
def drop_user(
    ctx: typer.Context, name: UserArg, yes: YesOpt = False, as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:  # fmt: skip
    """Drop a user (not root)."""
    _confirm(f"Drop user {name}?", yes)
    run_action(
        ctx, lambda c: c.drop_user(name), _done(f"user {name} dropped"), as_json=as_json, uri=uri
    )


user_app.command("list")(_list_command("user", lambda c: c.list_users()))


@user_app.command("describe")
def describe_user(
    ctx: typer.Context, name: UserArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """A user's roles."""

    def render(d: UserDescription) -> RenderableType:
        return kv_table({"user": d["user_name"], "roles": ", ".join(d["roles"]) or "-"})

    run_action(ctx, lambda c: c.describe_user(name), render, as_json=as_json, uri=uri)


@user_app.command("whoami")
def whoami(ctx: typer.Context, as_json: JsonOpt = False, uri: UriOpt = None) -> None:
    """The user these credentials authenticate, and their roles."""

    def render(d: WhoAmI) -> RenderableType:
        roles = ", ".join(d["roles"]) or "-"
        return kv_table({"user": d["user"], "roles": roles, "superuser": d["superuser"]})

    run_action(ctx, lambda c: c.whoami(), render, as_json=as_json, uri=uri)


@user_app.command("passwd")
def update_password(
    ctx: typer.Context,
    name: UserArg,
    password: NewPasswordOpt,
    old_password: Annotated[
        str | None,
        option(
            "--old-password",
            envvar="ELANUS_OLD_PASSWORD",
            help="The current password (needed for your own; $ELANUS_OLD_PASSWORD).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Change a password; tokens issued before it stop working."""
    run_action(
        ctx,
        lambda c: c.update_password(name, old_password, password),
        _done(f"password of {name} changed"),
        as_json=as_json,
        uri=uri,
    )


def _bind_command(unbind: bool) -> Any:
    """``user bind`` and ``user unbind``: one signature, two directions."""

    def command(
        ctx: typer.Context,
        name: UserArg,
        role: RoleArg,
        as_json: JsonOpt = False,
        uri: UriOpt = None,
    ) -> None:
        def call(c: Any) -> Any:
            return (c.revoke_role if unbind else c.grant_role)(name, role)

        message = f"{name} no longer has role {role}" if unbind else f"{name} has role {role}"
        run_action(ctx, call, _done(message), as_json=as_json, uri=uri)

    command.__doc__ = "Take a role from a user." if unbind else "Give a user a role."
    return command


user_app.command("bind")(_bind_command(unbind=False))
user_app.command("unbind")(_bind_command(unbind=True))


# -- roles ------------------------------------------------------------------------------------
@role_app.command("create")
def create_role(
    ctx: typer.Context, name: RoleArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """Create a role."""
    run_action(
        ctx, lambda c: c.create_role(name), _done(f"role {name} created"), as_json=as_json, uri=uri
    )


@role_app.command("drop")
def drop_role(
    ctx: typer.Context,
    name: RoleArg,
    force: Annotated[
        bool, typer.Option("--force", help="Also unbind its users and drop its grants.")
    ] = False,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    uri: UriOpt = None,
) -> None:
    """Drop a role (not admin or public)."""
    _confirm(f"Drop role {name}?", yes)
    run_action(
        ctx, lambda c: c.drop_role(name, force_drop=force), _done(f"role {name} dropped"),
        as_json=as_json, uri=uri,
    )  # fmt: skip


role_app.command("list")(_list_command("role", lambda c: c.list_roles()))


@role_app.command("describe")
def describe_role(
    ctx: typer.Context, name: RoleArg, as_json: JsonOpt = False, uri: UriOpt = None
) -> None:
    """A role's grants."""

    def render(d: RoleDescription) -> RenderableType:
        rows = [
            (p["object_type"], p["object_name"], p["db_name"], p["privilege"], p["grantor_name"])
            for p in d["privileges"]
        ]
        return table(["object type", "object", "database", "privilege", "grantor"], rows)

    run_action(ctx, lambda c: c.describe_role(name), render, as_json=as_json, uri=uri)


ObjectTypeOpt = Annotated[
    str,
    typer.Option("--object-type", help="Global, Database, Collection or User."),
]
ObjectNameOpt = Annotated[
    str, typer.Option("--object", help="The object's name ('*': every one of its type).")
]
DbOpt = Annotated[
    str, typer.Option("--db", help="Database of a Collection or Global grant ('*': every one).")
]


def _grant_command(revoke: bool) -> Any:
    """``role grant`` and ``role revoke``: one signature, two directions."""

    def command(
        ctx: typer.Context,
        name: RoleArg,
        privilege: Annotated[str, typer.Argument(help="Privilege, privilege group or All.")],
        object_type: ObjectTypeOpt = "Collection",
        object_name: ObjectNameOpt = "*",
        db: DbOpt = "default",
        as_json: JsonOpt = False,
        uri: UriOpt = None,
    ) -> None:
        def call(c: Any) -> Any:
            change = c.revoke_privilege if revoke else c.grant_privilege
            return change(name, object_type, privilege, object_name, db)

        verb = "may no longer" if revoke else "may"
        message = f"{name} {verb} {privilege} on {object_type} {object_name}"
        run_action(ctx, call, _done(message), as_json=as_json, uri=uri)

    command.__doc__ = (
        "Revoke a grant from a role." if revoke else "Grant a privilege on an object to a role."
    )
    return command


role_app.command("grant")(_grant_command(revoke=False))
role_app.command("revoke")(_grant_command(revoke=True))
