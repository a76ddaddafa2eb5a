"""JSON values as strata reads them: JSONPath parsing and evaluation, and the JSON functions'
semantics over parsed documents. Shared by the expression language, the query engine's
nested-field columns and the nested segment encoding, so it depends on nothing but types."""
