// Monaco's editor, JSON and GraphQL workers, bundled by Vite and served by
// Herald like every other asset.
import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import './playground.css';

import { ToolbarButton, useGraphiQL } from '@graphiql/react';
import { GraphiQL } from 'graphiql';
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';

import { CARRIED_KEYS, onCarried, withCarried, type Carried } from './carry';
import { exampleOperations, exampleVariables } from './examples';
import { fetcher } from './fetcher';
import { onIssuedToken, tokenOfText, withToken } from './token';

function KeyIcon() {
  return (
    <svg className="graphiql-toolbar-icon" aria-hidden="true" viewBox="0 0 24 24" fill="none" stroke="currentColor" strokeWidth="1.5">
      <circle cx="8" cy="15" r="4" />
      <path d="M11 12l9-9M17 6l3 3M14 9l2 2" />
    </svg>
  );
}

// setToken writes token into the Headers pane (or removes it for ""), and
// says why when the pane holds something that is not a JSON object.
function useSetToken(): (token: string) => void {
  const headerEditor = useGraphiQL((s) => s.headerEditor);
  return (token) => {
    if (!headerEditor) return;
    const next = withToken(headerEditor.getValue(), token);
    if (next === undefined) {
      window.alert('The Headers pane must hold a JSON object (for example {}) before a token can be put in it.');
      return;
    }
    headerEditor.setValue(next);
  };
}

// TokenFromSignIn puts the token of each sign-up or log-in result into the
// Headers pane, so the next operation runs as that user.
function TokenFromSignIn() {
  const setToken = useSetToken();
  useEffect(() => onIssuedToken(({ token }) => setToken(token)));
  return null;
}

function TokenButton() {
  const headerEditor = useGraphiQL((s) => s.headerEditor);
  const setToken = useSetToken();
  const onClick = () => {
    const current = tokenOfText(headerEditor?.getValue() ?? '');
    const entered = window.prompt('Bearer token for HTTP requests and the websocket (empty to remove):', current);
    if (entered !== null) setToken(entered.trim().replace(/^Bearer\s+/i, ''));
  };
  return (
    <ToolbarButton label="Set or clear the bearer token" onClick={onClick} data-testid="token-button">
      <KeyIcon />
    </ToolbarButton>
  );
}

// TokenStatus says under the result pane whether requests carry a token.
function TokenStatus() {
  const headerEditor = useGraphiQL((s) => s.headerEditor);
  const [text, setText] = useState('');
  useEffect(() => {
    if (!headerEditor) return;
    setText(headerEditor.getValue());
    const sub = headerEditor.onDidChangeModelContent(() => setText(headerEditor.getValue()));
    return () => sub.dispose();
  }, [headerEditor]);
  const token = tokenOfText(text);
  return (
    <p className="herald-token-status" data-testid="token-status" role="status">
      {token
        ? `Signed in: requests and subscriptions carry the token …${token.slice(-8)} from the Headers pane.`
        : 'No token: run SignUp or LogIn, or press the key button, to act as a user.'}
    </p>
  );
}

// CarryIds writes the ids each result shows into the Variables pane
// ("userId", "messageId", "groupId", "conversationId",
// "conversationMessageId"), so the next example runs on them,
// and says under the result pane what it carried.
function CarryIds() {
  const variableEditor = useGraphiQL((s) => s.variableEditor);
  const [last, setLast] = useState<Carried | null>(null);
  useEffect(
    () =>
      onCarried((c) => {
        if (!variableEditor) return;
        const text = variableEditor.getValue();
        const next = withCarried(text, c);
        if (next !== undefined && next !== text) variableEditor.setValue(next);
        setLast((prev) => ({ ...prev, ...c, labels: { ...prev?.labels, ...c.labels } }));
      }),
    [variableEditor],
  );
  if (!last) return null;
  const parts = CARRIED_KEYS.filter((k) => last[k]).map((k) => `${k} ← ${last.labels[k] || '…' + last[k]!.slice(-6)}`);
  return (
    <p className="herald-token-status" data-testid="carried-ids" role="status">
      Carried into Variables: {parts.join(', ')}
    </p>
  );
}

// saved returns what GraphiQL saved of an editor's text, or null.
const saved = (editor: 'query' | 'variables'): string | null => localStorage.getItem(`graphiql:${editor}`);

// The examples' variables, with handles of this browser's own (made once:
// GraphiQL keeps them, as edited, from then on).
const initialVariables = saved('variables') ?? exampleVariables();

function Playground() {
  return (
    <GraphiQL
      fetcher={fetcher}
      // The examples, until the user has edited the editors: GraphiQL saves
      // each editor's text on change under these keys and picks the saved
      // tab whose text matches the initial one. Passing the examples always
      // would open a new tab of them on each load once anything was edited.
      initialQuery={saved('query') ?? exampleOperations}
      initialVariables={initialVariables}
      defaultEditorToolsVisibility="variables"
    >
      <GraphiQL.Logo>Herald</GraphiQL.Logo>
      <GraphiQL.Toolbar>
        {({ prettify, merge, copy }) => (
          <>
            {prettify}
            {merge}
            {copy}
            <TokenButton />
          </>
        )}
      </GraphiQL.Toolbar>
      <GraphiQL.Footer>
        <TokenStatus />
        <CarryIds />
      </GraphiQL.Footer>
      <TokenFromSignIn />
    </GraphiQL>
  );
}

createRoot(document.getElementById('graphiql')!).render(
  <StrictMode>
    <Playground />
  </StrictMode>,
);
