'use strict';
// The same cases as node.test.js, with the n8n-workflow of n8n 1.113.3
// (1.110.0, installed as n8n-workflow-1) instead of the one of n8n 2.41.1.
process.env.N8N_WORKFLOW_PACKAGE = 'n8n-workflow-1';
require('./node.test.js');
