// Search: a typeahead of people by handle or name.
import { h } from '../dom';
import { USER } from '../queries';
import { q } from '../session';
import type { Connection, User } from '../types';
import { empty, errorState, loading, userRow } from '../ui';

const DELAY_MS = 200;

export function renderSearch(box: HTMLElement, initial = ''): void {
  const input = h('input', {
    class: 'input input-search',
    type: 'search',
    autocomplete: 'off',
    maxlength: '64',
    placeholder: 'Search people by name or handle',
    'aria-label': 'Search people',
    'aria-controls': 'search-results',
    'data-testid': 'search-query',
  });
  input.value = initial;
  const results = h('ul', { id: 'search-results', class: 'list card', 'data-testid': 'search-results', 'aria-live': 'polite' });
  const state = h('div', { class: 'feed-state' }, empty('Find people', 'Type a name or a handle: results show as you type.'));
  box.replaceChildren(h('div', { class: 'view-head' }, h('h1', {}, 'Search')), input, state, results);
  results.hidden = true;

  let timer: ReturnType<typeof setTimeout> | undefined;
  let seq = 0;
  const run = () => {
    clearTimeout(timer);
    const query = input.value.trim();
    const mine = ++seq;
    history.replaceState(null, '', query ? `#/search/${encodeURIComponent(query)}` : '#/search');
    if (!/[\p{L}\p{N}_]/u.test(query)) {
      results.hidden = true;
      results.replaceChildren();
      state.replaceChildren(empty('Find people', 'Type a name or a handle: results show as you type.'));
      return;
    }
    if (results.hidden) state.replaceChildren(loading('Searching…'));
    timer = setTimeout(async () => {
      try {
        const d = await q<{ searchUsers: Connection<User> }>(`query($q: String!) { searchUsers(query: $q, first: 10) { totalCount edges { cursor node { ${USER} } } pageInfo { hasNextPage endCursor } } }`, { q: query });
        // Only the answer to the latest query is shown.
        if (mine !== seq) return;
        const items = d.searchUsers.edges.map((e) => userRow(e.node, 'search-result', 'search-follow'));
        results.replaceChildren(...items);
        results.hidden = items.length === 0;
        state.replaceChildren(items.length ? '' : empty(`Nobody matches “${query}”`, 'Check the spelling, or try the start of a name or handle.'));
      } catch (err) {
        if (mine !== seq) return;
        results.hidden = true;
        state.replaceChildren(errorState(err, run, 'results'));
      }
    }, DELAY_MS);
  };
  input.addEventListener('input', run);
  if (initial) run();
  input.focus();
}
