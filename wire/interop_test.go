package wire

func registerReferenceExts() {}
