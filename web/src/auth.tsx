import { useEffect, useState } from "preact/hooks"
import { api, ok, setCsrfToken } from "./api/client"
import { Button, ErrorBox, Form, TextInput } from "./ui"

const Card = (p: { title: string; children: preact.ComponentChildren }) => (
  <main class="center">
    <div class="card auth-card">
      <h1>{p.title}</h1>
      {p.children}
    </div>
  </main>
)

/** A sign-in form's submit: busy while it runs, the API's message on failure, the session's CSRF token on success. */
const useSignIn = (onDone: () => void) => {
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const submit = async (call: () => Promise<{ csrfToken: string }>) => {
    setBusy(true)
    setError(undefined)
    try {
      setCsrfToken((await call()).csrfToken)
      onDone()
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }
  return { error, setError, busy, submit }
}

/**
 * Single sign-on (docs/sso.md): the providers of the public list (GET /api/auth/oidc/providers: id
 * and name) and whether the admin password still signs in (GET /api/auth/password-login).
 */
const useSignInOptions = () => {
  const [providers, setProviders] = useState<ReadonlyArray<{ id: string; name: string }>>([])
  const [passwordLogin, setPasswordLogin] = useState(true)
  useEffect(() => {
    void ok(api.GET("/api/auth/oidc/providers"))
      .then((r) => setProviders(r.providers))
      .catch(() => setProviders([]))
    void ok(api.GET("/api/auth/password-login"))
      .then((r) => setPasswordLogin(r.enabled))
      .catch(() => setPasswordLogin(true))
  }, [])
  return { providers, passwordLogin }
}

/** One button per provider: a full-page visit to its login, which comes back to the dashboard signed in. */
const SsoButtons = (p: { providers: ReadonlyArray<{ id: string; name: string }> }) =>
  p.providers.length === 0 ? null : (
    <div class="sso-buttons" role="group" aria-label="Single sign-on">
      {p.providers.map((provider) => (
        <a
          key={provider.id}
          class="btn btn-primary sso-button"
          href={`/api/auth/oidc/${encodeURIComponent(provider.id)}/login?returnTo=${encodeURIComponent(location.pathname + location.hash)}`}
        >
          Sign in with {provider.name}
        </a>
      ))}
    </div>
  )

/** Log in with the admin password (POST /api/auth/login: a cookie session and its CSRF token), or through a single sign-on provider. */
export const Login = (p: { onDone: () => void }) => {
  const [password, setPassword] = useState("")
  const { error, busy, submit } = useSignIn(p.onDone)
  const { providers, passwordLogin } = useSignInOptions()
  return (
    <Card title="Log in to the gateway">
      <SsoButtons providers={providers} />
      {providers.length > 0 && passwordLogin ? <p class="muted small sso-or">or with the admin password</p> : null}
      {passwordLogin ? (
        <>
          <Form label="Log in" onSubmit={() => void submit(() => ok(api.POST("/api/auth/login", { body: { password } })))}>
            <TextInput
              label="Admin password"
              type="password"
              name="password"
              autoComplete="current-password"
              required
              value={password}
              onInput={setPassword}
              wide
            />
            <ErrorBox error={error} />
            <Button kind="primary" type="submit" busy={busy}>
              Log in
            </Button>
          </Form>
          <p class="muted small">
            Forgot it? On the gateway's host run <code>gateway reset-password</code>.
          </p>
        </>
      ) : (
        <p class="muted small">Password sign-in is turned off on this gateway: sign in with single sign-on.</p>
      )}
    </Card>
  )
}

/** First run: no admin password yet (GET /api/init). POST /api/auth/setup sets it and logs in. */
export const Setup = (p: { onDone: () => void }) => {
  const [password, setPassword] = useState("")
  const [again, setAgain] = useState("")
  const { error, setError, busy, submit } = useSignIn(p.onDone)
  const { providers } = useSignInOptions()
  return (
    <Card title="Welcome: set the admin password">
      <SsoButtons providers={providers} />
      <p class="muted">
        The gateway has no admin password yet. Choose one (at least 8 characters); it protects this dashboard and the management API.
      </p>
      <Form
        label="First-run setup"
        onSubmit={() =>
          password !== again
            ? setError("the two passwords differ")
            : void submit(() => ok(api.POST("/api/auth/setup", { body: { password } })))
        }
      >
        <TextInput
          label="New admin password"
          type="password"
          name="new-password"
          autoComplete="new-password"
          required
          value={password}
          onInput={setPassword}
          wide
        />
        <TextInput
          label="Repeat it"
          type="password"
          name="repeat-password"
          autoComplete="new-password"
          required
          value={again}
          onInput={setAgain}
          wide
        />
        <ErrorBox error={error} />
        <Button kind="primary" type="submit" busy={busy}>
          Set password and continue
        </Button>
      </Form>
    </Card>
  )
}
