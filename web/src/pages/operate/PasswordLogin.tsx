import { useState } from "preact/hooks"
import { api, ok } from "../../api/client"
import { Button, Checkbox, Form, Loader, useAction, useLoad } from "../../ui"

// Whether the admin password still signs in (GET/PUT /api/auth/password-login, docs/sso.md,
// "Turning password sign-in off"), beside the single sign-on providers configured. Turning it off
// is refused by the gateway until an admin has signed in through a provider: the toast says so.

const PasswordLoginForm = (p: { enabled: boolean; providers: number; onSaved: () => void }) => {
  const [on, setOn] = useState(p.enabled)
  const [run, busy] = useAction()
  return (
    <Form
      label="Password sign-in"
      onSubmit={() =>
        void run(() => ok(api.PUT("/api/auth/password-login", { body: { enabled: on } })), "Password sign-in saved").then(
          (r) => r && p.onSaved()
        )
      }
    >
      <Checkbox
        label="The admin password signs in"
        checked={on}
        onChange={setOn}
        hint={`Single sign-on providers configured: ${p.providers}. Off only once an admin has signed in through one; an admin API key always works.`}
      />
      <Button kind="primary" type="submit" busy={busy}>
        Save password sign-in
      </Button>
    </Form>
  )
}

export const PasswordLogin = () => {
  const state = useLoad(() =>
    Promise.all([ok(api.GET("/api/auth/password-login")), ok(api.GET("/api/auth/oidc/providers"))]).then(([login, list]) => ({
      enabled: login.enabled,
      providers: list.providers.length
    }))
  )
  return (
    <Loader of={state}>
      {(s) => <PasswordLoginForm key={String(s.enabled)} enabled={s.enabled} providers={s.providers} onSaved={state.reload} />}
    </Loader>
  )
}
