import { useState } from "preact/hooks"
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

/** Log in with the admin password (POST /api/auth/login: a cookie session and its CSRF token). */
export const Login = (p: { onDone: () => void }) => {
  const [password, setPassword] = useState("")
  const { error, busy, submit } = useSignIn(p.onDone)
  return (
    <Card title="Log in to the gateway">
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
    </Card>
  )
}

/** First run: no admin password yet (GET /api/init). POST /api/auth/setup sets it and logs in. */
export const Setup = (p: { onDone: () => void }) => {
  const [password, setPassword] = useState("")
  const [again, setAgain] = useState("")
  const { error, setError, busy, submit } = useSignIn(p.onDone)
  return (
    <Card title="Welcome: set the admin password">
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
