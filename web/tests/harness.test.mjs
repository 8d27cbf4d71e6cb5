// The request check of the browser tests must be able to fail.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { foreignRequests } from './harness.mjs';

test('foreignRequests keeps every URL not on the server', () => {
  const host = '127.0.0.1:4321';
  const urls = [
    'http://127.0.0.1:4321/',
    'http://127.0.0.1:4321/assets/a-1.js',
    'ws://127.0.0.1:4321/graphql',
    'data:font/woff2;base64,AAAA',
    'blob:http://127.0.0.1:4321/5b1c',
    'https://127.0.0.1:4321/',
    'http://127.0.0.1:4322/',
    'http://localhost:4321/',
    'https://fonts.example/css',
    'wss://api.example/graphql',
  ];
  assert.deepEqual(foreignRequests(urls, host), [
    'https://127.0.0.1:4321/',
    'http://127.0.0.1:4322/',
    'http://localhost:4321/',
    'https://fonts.example/css',
    'wss://api.example/graphql',
  ]);
});
