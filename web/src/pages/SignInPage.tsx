import { useState, type FormEvent } from 'react';
import { api, fieldError } from '../api.ts';
import { startSession, takeNotice } from '../session.ts';
import { Button, ErrorBanner, Field } from '../components/index.ts';
import { useAction, useDocumentTitle } from '../hooks.ts';

interface LoginResponse {
  token: string;
  expires_at: string;
}

/** Email and password in, a session out (POST /auth/login). */
export function SignInPage() {
  useDocumentTitle('Sign in');
  const [notice] = useState(takeNotice);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [missing, setMissing] = useState<{ email?: string; password?: string }>({});
  const login = useAction(async () => {
    const session = await api.post<LoginResponse>('/auth/login', { email: email.trim(), password });
    startSession({ token: session.token, email: email.trim(), expiresAt: session.expires_at });
  });

  async function submit(event: FormEvent) {
    event.preventDefault();
    const empty = {
      email: email.trim() ? undefined : 'Enter the email address you sign in with.',
      password: password ? undefined : 'Enter your password.',
    };
    setMissing(empty);
    if (empty.email || empty.password) return;
    await login.run();
  }

  return (
    <main id="main" className="sign-in">
      <div className="sign-in-card">
        <p className="brand">Mailroom</p>
        <h1 className="page-title">Sign in</h1>
        {notice ? (
          <p className="notice" role="status">
            {notice}
          </p>
        ) : null}
        <form onSubmit={submit} noValidate aria-describedby={login.error ? 'sign-in-error' : undefined}>
          <Field
            label="Email"
            type="email"
            name="email"
            autoComplete="username"
            value={email}
            onChange={setEmail}
            error={missing.email ?? fieldError(login.error, 'email')}
            required
          />
          <Field
            label="Password"
            type="password"
            name="password"
            autoComplete="current-password"
            value={password}
            onChange={setPassword}
            error={missing.password ?? fieldError(login.error, 'password')}
            required
          />
          <div id="sign-in-error">
            <ErrorBanner error={login.error} exceptFields={['email', 'password']} />
          </div>
          <Button type="submit" variant="primary" busy={login.busy} busyLabel="Signing in…">
            Sign in
          </Button>
        </form>
      </div>
    </main>
  );
}
