import { useState } from "preact/hooks"
import { api, ok } from "../api/client"
import { can } from "../access"
import { Link } from "../router"
import {
  Badge,
  Button,
  Confirm,
  Dialog,
  Empty,
  ErrorBox,
  fmtDate,
  Form,
  Loader,
  Page,
  Section,
  Select,
  Table,
  TextInput,
  useAction,
  useLoad
} from "../ui"
import "./People.css"

// People & teams: the users who manage the gateway and hold keys, their roles, the teams and their
// members (docs/teams.md). GET/POST /api/users, PATCH/DELETE /api/users/{id}, GET/POST /api/teams,
// DELETE /api/teams/{id}, GET/POST /api/teams/{id}/members, DELETE /api/teams/{id}/members/{userId}.

const loadUsers = () => ok(api.GET("/api/users"))
const loadTeams = () => ok(api.GET("/api/teams"))
type User = Awaited<ReturnType<typeof loadUsers>>["users"][number]
type Team = Awaited<ReturnType<typeof loadTeams>>["teams"][number]
type Role = User["role"]
type TeamRole = User["teams"][number]["role"]

const ROLES: ReadonlyArray<{ value: Role; label: string }> = [
  { value: "member", label: "member (own keys and usage)" },
  { value: "team-admin", label: "team-admin (their teams' members and keys)" },
  { value: "viewer", label: "viewer (reads everything, changes nothing)" },
  { value: "admin", label: "admin (everything)" }
]
const TEAM_ROLES: ReadonlyArray<{ value: TeamRole; label: string }> = [
  { value: "member", label: "member" },
  { value: "team-admin", label: "team-admin" }
]

const roleBadge = (r: Role) => <Badge kind={r === "admin" ? "warn" : r === "viewer" ? "muted" : "info"}>{r}</Badge>

const CreateUser = (p: { teams: ReadonlyArray<Team>; onCreated: () => void }) => {
  const [email, setEmail] = useState("")
  const [name, setName] = useState("")
  const [role, setRole] = useState<Role>("member")
  const [team, setTeam] = useState("")
  const [run, busy] = useAction()
  const submit = () =>
    void run(
      () =>
        ok(
          api.POST("/api/users", {
            body: { email: email.trim(), ...(name.trim() ? { name: name.trim() } : {}), role, ...(team ? { teamIds: [team] } : {}) }
          })
        ),
      "User created"
    ).then((u) => {
      if (!u) return
      setEmail("")
      setName("")
      p.onCreated()
    })
  return (
    <Form label="Add a user" onSubmit={submit}>
      <TextInput label="Email" type="email" value={email} onInput={setEmail} required hint="How they sign in; unique." />
      <TextInput label="Name" value={name} onInput={setName} hint="Empty: the email." />
      <Select label="Role" value={role} options={ROLES} onChange={setRole} />
      <Select
        label="Team"
        value={team}
        options={[{ value: "", label: "No team" }, ...p.teams.map((t) => ({ value: t.id, label: t.name }))]}
        onChange={setTeam}
        hint="Joins as a member; more on Teams below."
      />
      <Button kind="primary" type="submit" busy={busy}>
        Add user
      </Button>
    </Form>
  )
}

/** A user's role, changed in place (PATCH /api/users/{id} {role}). */
const RoleSelect = (p: { user: User; onSaved: () => void }) => {
  const [run, busy] = useAction()
  if (!can("users.update")) return roleBadge(p.user.role)
  return (
    <select
      aria-label={`Role of ${p.user.email}`}
      value={p.user.role}
      disabled={busy}
      onChange={(e) => {
        const role = (e.currentTarget as HTMLSelectElement).value as Role
        void run(
          () => ok(api.PATCH("/api/users/{id}", { params: { path: { id: p.user.id } }, body: { role } })),
          `${p.user.email} is now ${role}`
        ).then(() => p.onSaved())
      }}
    >
      {ROLES.map((r) => (
        <option key={r.value} value={r.value}>
          {r.value}
        </option>
      ))}
    </select>
  )
}

const Users = (p: { users: ReadonlyArray<User>; teams: ReadonlyArray<Team>; reload: () => void }) => {
  const [removing, setRemoving] = useState<User | undefined>()
  const [run] = useAction()
  const teamName = (id: string) => p.teams.find((t) => t.id === id)?.name ?? id
  const toggle = (u: User) =>
    void run(
      () => ok(api.PATCH("/api/users/{id}", { params: { path: { id: u.id } }, body: { disabled: !u.disabled } })),
      u.disabled ? `${u.email} enabled` : `${u.email} disabled`
    ).then(() => p.reload())
  return (
    <>
      <Table
        caption="Users"
        rowKey={(u) => u.id}
        rows={p.users}
        empty={<Empty title="No users yet">Add the people who manage the gateway or hold keys.</Empty>}
        columns={[
          {
            label: "User",
            render: (u) => (
              <>
                <strong>{u.name || u.email}</strong>
                <div class="muted">{u.email}</div>
              </>
            )
          },
          { label: "Role", render: (u) => <RoleSelect user={u} onSaved={p.reload} /> },
          {
            label: "Teams",
            render: (u) =>
              u.teams.length === 0
                ? "—"
                : u.teams.map((t) => (
                    <span key={t.teamId} class="people-team">
                      {teamName(t.teamId)}
                      {t.role === "team-admin" ? " (team-admin)" : ""}
                    </span>
                  ))
          },
          {
            label: "State",
            render: (u) => (u.disabled ? <Badge kind="muted">disabled</Badge> : <Badge kind="ok">active</Badge>)
          },
          { label: "Last sign-in", render: (u) => (u.lastLoginAt ? fmtDate(u.lastLoginAt) : "never") },
          {
            label: "Usage",
            render: (u) => <Link to={`/usage?user=${encodeURIComponent(u.id)}`}>Usage</Link>
          },
          {
            label: "Actions",
            render: (u) => (
              <div class="row-actions">
                {can("users.update") && <Button onClick={() => toggle(u)}>{u.disabled ? "Enable" : "Disable"}</Button>}
                {can("users.remove") && (
                  <Button kind="danger" onClick={() => setRemoving(u)}>
                    Delete
                  </Button>
                )}
              </div>
            )
          }
        ]}
      />
      <Confirm
        item={removing}
        title="Delete user"
        action="Delete user"
        onClose={() => setRemoving(undefined)}
        remove={(u) => ok(api.DELETE("/api/users/{id}", { params: { path: { id: u.id }, query: { force: "true" } } }))}
        done="User deleted"
        onRemoved={p.reload}
      >
        {(u) => (
          <p>
            Delete <strong>{u.email}</strong>? They can no longer sign in, they leave their teams, and their sessions end. Their keys are
            disabled and kept without an owner (their usage then counts for nobody).
          </p>
        )}
      </Confirm>
    </>
  )
}

const CreateTeam = (p: { onCreated: () => void }) => {
  const [name, setName] = useState("")
  const [run, busy] = useAction()
  return (
    <Form
      label="Create a team"
      onSubmit={() =>
        void run(() => ok(api.POST("/api/teams", { body: { name: name.trim() } })), "Team created").then((t) => {
          if (!t) return
          setName("")
          p.onCreated()
        })
      }
    >
      <TextInput label="Team name" value={name} onInput={setName} required />
      <Button kind="primary" type="submit" busy={busy}>
        Create team
      </Button>
    </Form>
  )
}

/** A team's members: their team role, remove, and add a user with a team role. */
const Members = (p: { team: Team; users: ReadonlyArray<User>; onChanged: () => void }) => {
  const members = useLoad(() => ok(api.GET("/api/teams/{id}/members", { params: { path: { id: p.team.id } } })), [p.team.id])
  const [userId, setUserId] = useState("")
  const [role, setRole] = useState<TeamRole>("member")
  const [run, busy] = useAction()
  const changed = () => {
    members.reload()
    p.onChanged()
  }
  const add = (id: string, r: TeamRole, message: string) =>
    void run(
      () => ok(api.POST("/api/teams/{id}/members", { params: { path: { id: p.team.id } }, body: { userId: id, role: r } })),
      message
    ).then((m) => m && changed())
  const remove = (id: string, email: string) =>
    void run(
      () => ok(api.DELETE("/api/teams/{id}/members/{userId}", { params: { path: { id: p.team.id, userId: id } } })),
      `${email} left ${p.team.name}`
    ).then(changed)
  const manage = can("teams.addMember")
  return (
    <>
      <ErrorBox error={members.error} retry={members.reload} />
      <Loader of={members}>
        {(m) => {
          const outside = p.users.filter((u) => !m.members.some((x) => x.userId === u.id))
          return (
            <>
              <Table
                caption={`Members of ${p.team.name}`}
                rowKey={(x) => x.userId}
                rows={m.members}
                empty={<Empty title="No members yet">Add a user below.</Empty>}
                columns={[
                  { label: "Member", render: (x) => `${x.name || x.email} (${x.email})` },
                  {
                    label: "Team role",
                    render: (x) =>
                      manage ? (
                        <select
                          aria-label={`Team role of ${x.email}`}
                          value={x.role}
                          disabled={busy}
                          onChange={(e) =>
                            add(
                              x.userId,
                              (e.currentTarget as HTMLSelectElement).value as TeamRole,
                              `${x.email} is now ${(e.currentTarget as HTMLSelectElement).value} of ${p.team.name}`
                            )
                          }
                        >
                          {TEAM_ROLES.map((r) => (
                            <option key={r.value} value={r.value}>
                              {r.label}
                            </option>
                          ))}
                        </select>
                      ) : (
                        x.role
                      )
                  },
                  {
                    label: "Actions",
                    render: (x) =>
                      can("teams.removeMember") ? (
                        <Button kind="danger" busy={busy} onClick={() => remove(x.userId, x.email)}>
                          Remove
                        </Button>
                      ) : null
                  }
                ]}
              />
              {manage && outside.length > 0 && (
                <Form label={`Add a member to ${p.team.name}`} onSubmit={() => userId && add(userId, role, "Member added")}>
                  <Select
                    label="User"
                    value={userId}
                    options={[
                      { value: "", label: "Choose a user" },
                      ...outside.map((u) => ({ value: u.id, label: `${u.name || u.email} (${u.email})` }))
                    ]}
                    onChange={setUserId}
                  />
                  <Select label="Team role" value={role} options={TEAM_ROLES} onChange={setRole} />
                  <Button kind="primary" type="submit" busy={busy} disabled={!userId}>
                    Add member
                  </Button>
                </Form>
              )}
            </>
          )
        }}
      </Loader>
    </>
  )
}

const Teams = (p: { teams: ReadonlyArray<Team>; users: ReadonlyArray<User>; reload: () => void }) => {
  const [open, setOpen] = useState<Team | undefined>()
  const [removing, setRemoving] = useState<Team | undefined>()
  return (
    <>
      <Table
        caption="Teams"
        rowKey={(t) => t.id}
        rows={p.teams}
        empty={<Empty title="No teams yet">Create a team, then add its members.</Empty>}
        columns={[
          { label: "Team", render: (t) => <strong>{t.name}</strong> },
          { label: "Members", class: "num", render: (t) => String(t.memberCount) },
          { label: "Created", render: (t) => fmtDate(t.createdAt) },
          { label: "Usage", render: (t) => <Link to={`/usage?team=${encodeURIComponent(t.id)}`}>Usage</Link> },
          {
            label: "Actions",
            render: (t) => (
              <div class="row-actions">
                <Button onClick={() => setOpen(t)}>Members</Button>
                {can("teams.remove") && (
                  <Button kind="danger" onClick={() => setRemoving(t)}>
                    Delete
                  </Button>
                )}
              </div>
            )
          }
        ]}
      />
      <Dialog open={open !== undefined} title={open ? `Members of ${open.name}` : "Members"} onClose={() => setOpen(undefined)}>
        {open && <Members team={open} users={p.users} onChanged={p.reload} />}
      </Dialog>
      <Confirm
        item={removing}
        title="Delete team"
        action="Delete team"
        onClose={() => setRemoving(undefined)}
        remove={(t) => ok(api.DELETE("/api/teams/{id}", { params: { path: { id: t.id }, query: { force: "true" } } }))}
        done="Team deleted"
        onRemoved={p.reload}
      >
        {(t) => (
          <p>
            Delete <strong>{t.name}</strong>? Its members stay users; the team's own keys are disabled and kept without an owner.
          </p>
        )}
      </Confirm>
    </>
  )
}

export default function PeoplePage() {
  const users = useLoad(loadUsers)
  const teams = useLoad(loadTeams)
  const reload = () => {
    users.reload()
    teams.reload()
  }
  return (
    <Page
      title="People & teams"
      description="Who manages the gateway and holds keys, their roles, and the teams usage and limits are counted by."
    >
      <Section title="Users">
        <ErrorBox error={users.error} retry={users.reload} />
        <Loader of={users}>{(u) => <Users users={u.users} teams={teams.data?.teams ?? []} reload={reload} />}</Loader>
        {can("users.create") && <CreateUser teams={teams.data?.teams ?? []} onCreated={reload} />}
      </Section>
      <Section title="Teams">
        <ErrorBox error={teams.error} retry={teams.reload} />
        <Loader of={teams}>{(t) => <Teams teams={t.teams} users={users.data?.users ?? []} reload={reload} />}</Loader>
        {can("teams.create") && <CreateTeam onCreated={reload} />}
      </Section>
    </Page>
  )
}
