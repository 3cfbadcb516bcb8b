import type { ComponentType } from "preact"
import { useEffect, useState } from "preact/hooks"
import { api, ok, setCsrfToken, setOnUnauthorized } from "./api/client"
import { PAGES, type PageEntry } from "./pages"
import { stopLiveFeeds } from "./live"
import { Link, navigate, useLocation } from "./router"
import { Button, Loading, Toasts, useAction, useInterval } from "./ui"
import { Login, Setup } from "./auth"
import { can, currentRole, setAccess } from "./access"

type Gate =
  | { readonly kind: "checking" }
  | { readonly kind: "setup" }
  | { readonly kind: "login" }
  | { readonly kind: "in"; readonly via: "session" | "api-key" | "local"; readonly version: string }
  | { readonly kind: "down"; readonly message: string }

/** Who may use the dashboard: a session, or (requireLogin off) this machine directly. */
const check = async (): Promise<Gate> => {
  try {
    const session = await ok(api.GET("/api/auth/session"))
    setCsrfToken(session.csrfToken)
    // The caller's role and the routes it may call (docs/teams.md): pages and buttons follow them.
    const access = session as typeof session & { role?: string | null; routes?: ReadonlyArray<string> }
    setAccess(access.routes === undefined ? undefined : { role: access.role ?? null, routes: access.routes })
    const init = await ok(api.GET("/api/init"))
    if (session.authenticated) return { kind: "in", via: session.via ?? "session", version: init.version }
    if (init.authenticated) return { kind: "in", via: "local", version: init.version }
    return session.passwordSet ? { kind: "login" } : { kind: "setup" }
  } catch (e) {
    return { kind: "down", message: e instanceof Error ? e.message : String(e) }
  }
}

const PageView = (p: { entry: PageEntry }) => {
  const [Comp, setComp] = useState<{ c: ComponentType } | undefined>()
  const [error, setError] = useState<string>()
  useEffect(() => {
    let live = true
    setComp(undefined)
    p.entry.load().then(
      (m) => live && setComp({ c: m.default }),
      (e: unknown) =>
        live && setError(`this page could not be loaded (${e instanceof Error ? e.message : String(e)}); reload the dashboard`)
    )
    document.title = `${p.entry.title} · Gateway`
    return () => {
      live = false
    }
  }, [p.entry])
  if (error) return <p role="alert">{error}</p>
  return Comp ? <Comp.c /> : <Loading />
}

const NotFound = () => (
  <section class="page">
    <h1>Page not found</h1>
    <p>
      There is no dashboard page here. <Link to="/">Go to the overview</Link>.
    </p>
  </section>
)

/** A page the caller's role cannot use (the first page, for a member): where it may go instead. */
const NotForRole = (p: { pages: ReadonlyArray<PageEntry> }) => (
  <section class="page">
    <h1>Not available to your role</h1>
    <p>
      This page is not available to the role <strong>{currentRole() ?? "unknown"}</strong>.{p.pages.length > 0 ? " Pages you can use:" : ""}
    </p>
    <ul>
      {p.pages.map((e) => (
        <li key={e.path}>
          <Link to={e.path}>{e.title}</Link>
        </li>
      ))}
    </ul>
  </section>
)

/** Whether a tunnel is open (the health ping says so): the gateway is then reachable from the internet. */
const useTunnelOpen = () => {
  const [open, setOpen] = useState(false)
  const poll = () =>
    void api.GET("/api/health/ping").then(
      (r) => setOpen(r.data?.tunnelOpen === true),
      () => {}
    )
  useEffect(poll, [])
  useInterval(poll, 10_000)
  return open
}

const Shell = (p: { via: "session" | "api-key" | "local"; version: string; onLogout: () => void }) => {
  const { path } = useLocation()
  const tunnelOpen = useTunnelOpen()
  const [menu, setMenu] = useState(false)
  const [run, busy] = useAction()
  const pages = PAGES.filter((e) => e.needs === undefined || can(e.needs))
  const entry = PAGES.find((e) => e.path === path)
  useEffect(() => setMenu(false), [path])
  const groups = ["Monitor", "Route", "Access", "Operate"] as const
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <button type="button" class="btn btn-plain menu-toggle" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>
          ☰ <span class="sr-only">Menu</span>
        </button>
        <Link to="/" class="brand">
          Gateway
        </Link>
        <span class="muted version">v{p.version}</span>
        <span class="spacer" />
        {tunnelOpen && (
          <Link to="/tunnels" class="badge badge-warn tunnel-open" title="A tunnel is open: this gateway is reachable from the internet">
            Tunnel open
          </Link>
        )}
        {p.via === "local" ? (
          <span class="muted" title="requireLogin is off: this machine may manage the gateway without logging in">
            local access
          </span>
        ) : p.via === "session" ? (
          <Button
            busy={busy}
            onClick={() =>
              void run(async () => {
                stopLiveFeeds()
                await ok(api.POST("/api/auth/logout"))
                p.onLogout()
              })
            }
          >
            Log out
          </Button>
        ) : null}
      </header>
      <nav id="nav" class={menu ? "nav open" : "nav"} aria-label="Dashboard">
        {groups
          .filter((g) => pages.some((e) => e.group === g))
          .map((g) => (
            <div class="nav-group" key={g}>
              <div class="nav-title">{g}</div>
              <ul>
                {pages
                  .filter((e) => e.group === g)
                  .map((e) => (
                    <li key={e.path}>
                      <Link to={e.path} aria-current={e.path === path ? "page" : undefined}>
                        {e.title}
                      </Link>
                    </li>
                  ))}
              </ul>
            </div>
          ))}
      </nav>
      <main id="main" tabIndex={-1}>
        {entry && !pages.includes(entry) ? <NotForRole pages={pages} /> : entry ? <PageView entry={entry} /> : <NotFound />}
      </main>
      <Toasts />
    </div>
  )
}

export const App = () => {
  const [gate, setGate] = useState<Gate>({ kind: "checking" })
  const recheck = () => void check().then(setGate)
  useEffect(() => {
    recheck()
    setOnUnauthorized(() => recheck())
  }, [])
  switch (gate.kind) {
    case "checking":
      return <Loading />
    case "down":
      return (
        <main class="center">
          <h1>The gateway does not answer</h1>
          <p role="alert">{gate.message}</p>
          <Button onClick={recheck}>Try again</Button>
        </main>
      )
    case "setup":
      return <Setup onDone={recheck} />
    case "login":
      return <Login onDone={recheck} />
    case "in":
      return (
        <Shell
          via={gate.via}
          version={gate.version}
          onLogout={() => {
            setCsrfToken(null)
            navigate("/", true)
            recheck()
          }}
        />
      )
  }
}
