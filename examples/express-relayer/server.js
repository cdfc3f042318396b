// @ts-check
// Runs the relay app: node server.js, configured by the environment.
//   SHARDKEEPER_URL            the node or load balancer, e.g. http://127.0.0.1:8080
//   SHARDKEEPER_RELAYER_TOKEN  the relayer token (or the account's own token)
//   RELAYER_ACCOUNT_ID         the relayer account that pays
//   PORT                       where to listen (default 3000)

import { Shardkeeper } from '@shardkeeper/client';
import { relayApp } from './app.js';

/** @param {string} name */
function required(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`express-relayer: set ${name}`);
    process.exit(2);
  }
  return v;
}

const sk = new Shardkeeper({ url: required('SHARDKEEPER_URL'), relayerToken: required('SHARDKEEPER_RELAYER_TOKEN') });
const port = Number(process.env.PORT ?? 3000);
const server = relayApp({ sk, accountId: required('RELAYER_ACCOUNT_ID') }).listen(port, () => {
  const addr = server.address();
  console.log(JSON.stringify({ msg: 'relaying', port: typeof addr === 'object' && addr ? addr.port : port }));
});
